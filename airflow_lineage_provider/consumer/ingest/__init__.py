"""The ingest path from a request's body to the store: reading the body (:mod:`.request_body`), strict
validation (:mod:`.strict`; the lenient reading of events, which the store's writes take, is
:mod:`..validation`), grouped commits (:mod:`.grouped_ingest`) and what the endpoints do with the events
(:mod:`.service`)."""
