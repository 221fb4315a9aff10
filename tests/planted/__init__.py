"""Planted secrets: the shapes (built at run time), a local echo upstream and the agent
that puts every secret in every place a client can (see tests/test_planted_secrets.py)."""
