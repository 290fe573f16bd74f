"""Minibatch Metropolis-Hastings samplers: one chain loop, pluggable accept/reject tests."""
