"""Data sets and feedback simulation for replays and experiments (numpy + sklearn data)."""
