"""Small Python clients of the worker's HTTP API."""
