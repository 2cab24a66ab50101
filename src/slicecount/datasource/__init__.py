"""The Grafana JSON datasource service (SimpleJSON and simpod-json-datasource protocols)."""
