"""Job dispatch: a jobs table claimed with leases, worked by in-process or `neens worker` loops."""
