"""Background roles of noisyloop (trainer, NREst, sweeper), run beside the API."""
