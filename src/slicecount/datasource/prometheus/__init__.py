"""The Prometheus HTTP query API over slicecount's slices: what Grafana's built-in Prometheus
datasource, Explore, alerting and ``promtool`` speak. ``names`` maps slicecount names to
Prometheus ones, ``params`` reads requests, ``plan`` chooses the precision and what to read,
``results`` writes the envelopes, ``api`` is the endpoints (``lookups`` the look-ups,
``exemplars`` the exemplars')."""
