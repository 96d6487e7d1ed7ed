"""Serving halo models on other people's serving platforms (`halo.serve.ray`: Ray Serve).

`halo serve`, the command, is halo's own server; these modules put the same models behind
platforms that scale replicas out over a cluster.
"""
