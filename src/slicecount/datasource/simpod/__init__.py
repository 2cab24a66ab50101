"""The simPod JSON protocol (Grafana's JSON datasource): request bodies (``protocol``), the
targets' language (``targets``, compiled to PromQL trees, and its ``rewrites``), the pickers'
answers (``pickers``), the answer shapes (``shapes``) and one function per endpoint
(``endpoints``)."""
