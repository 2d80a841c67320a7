"""Benchmarks behind ``noisyloop bench``: learners in process, and the running service.

Each benchmark measures noisyloop and, in the same run, a reference (a plain
numpy loop, Vowpal Wabbit's Python binding, a bare FastAPI endpoint), so that
figures are compared as ratios on the same machine rather than against
numbers measured elsewhere.
"""
