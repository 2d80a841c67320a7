"""Sub-commands of the ``noisyloop`` command line (each exposes ``register``)."""
