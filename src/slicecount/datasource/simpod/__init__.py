"""The simPod JSON protocol (Grafana's JSON datasource): request bodies (``protocol``, whose
targets are compiled by ``slicecount.targets``), the pickers' answers (``pickers``), the answer
shapes (``shapes``) and one function per endpoint (``endpoints``)."""
