"""Prometheus metrics (``--metrics-port``): what the server records, and where it is read.

``recorder.Recorder`` is what the layers below the api record into; it does nothing, so
a server without a metrics port pays a call to an empty method at most. With the port
on, ``prometheus.PrometheusRecorder`` records into a registry of the server's own, and
``endpoint.MetricsEndpoint`` answers ``GET /metrics`` from it. With ``--workers`` above 1
each worker's endpoint answers on a private Unix socket instead, and
``gathering.GatheringEndpoint``, in a process of its own, serves the port with the
merge of every worker's figures (``across``).
"""
