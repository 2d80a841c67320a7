"""Replay data sets through learners with simulated noisy feedback."""
