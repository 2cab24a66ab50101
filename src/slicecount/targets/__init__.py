"""The simPod targets' language: PromQL with Grafana's conveniences (``grammar``), compiled to
the PromQL tree the one engine evaluates, and the rewrites that make a target's tree differ
from the same PromQL's (``rewrites``). Pure: no HTTP framework and no Redis command here. It
may import query/ (the catalogue of names), promql/, core/ and errors; the simPod surface
(``datasource/simpod``) imports it.
"""
