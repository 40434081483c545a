"""Remote work: dispatch messages signed with MAM_DISPATCH_SECRET, the origin's remote delivery,
and `mam runner`, which takes jobs for its own host's sessions over the broker."""
