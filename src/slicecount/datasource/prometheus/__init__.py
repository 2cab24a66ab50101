"""The Prometheus HTTP query API over slicecount's slices: what Grafana's built-in Prometheus
datasource, Explore, alerting and ``promtool`` speak. ``params`` reads requests, ``api`` is
the query endpoints (``lookups`` the look-ups, ``query_exemplars`` the exemplars'),
``results`` writes the envelopes and ``http`` routes them; the names it answers by are the
query loop's catalogue (``query/catalogue.py``)."""
