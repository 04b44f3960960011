"""Who may do what: access levels and API keys (:mod:`.access`), the one auth dependency (:mod:`.auth`), the guards
that turn a credential into a principal (:mod:`.guards`) and the audit trail (:mod:`.audit`)."""
