"""HTTP/WebSocket API of noisyloop (FastAPI); composes the store and the learners."""
