"""The daemon: ``scheduler serve`` and everything it serves.

What it holds: the process (``_serve``: listeners, the configuration watcher, signals,
shutdown), the native transport (``_native``: SI structs as MessagePack frames) and the SI
over gRPC (``_grpc``, with request batching in ``_batching``), TLS (``_tls``), YuniKorn's
REST API (``_rest``, described by ``_openapi``; the web UI's dashboard views in
``_dashboard``), Prometheus metrics (``_metrics``), the
health checks (``_health``) and the status page (``web/index.html``).

It uses the core through its package only (``scheduler.core``: ``Core``,
``start_scheduler`` and the names it exports), never its modules, and may import
``scheduler.config``, ``scheduler.si`` and ``scheduler._errors``. The domain rooms
(objects, policies, gangs) are out of its reach.
"""
