"""Checks to run on a dataset before trusting a minibatch MH test."""
