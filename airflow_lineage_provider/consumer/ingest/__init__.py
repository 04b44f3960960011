"""The ingest path from a request's body to the store: reading the body (:mod:`.request_body`), lenient and strict
validation (:mod:`.validation`, :mod:`.strict`), grouped commits (:mod:`.grouped_ingest`) and what the endpoints
do with the events (:mod:`.service`)."""
