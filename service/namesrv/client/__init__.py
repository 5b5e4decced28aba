"""Small clients of the fleet's HTTP API for programs and tests (watching routes)."""
