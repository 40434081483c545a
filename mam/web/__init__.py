"""`mam web`: the page to watch and steer the workspace from any screen, a phone included.

`app.build_app()` makes the whole ASGI app from a workspace and its settings, so `mam web` serves it
now and the node can host the same object later. What the page shows is `mam top`'s model
(`mam.view.model`, `mam.view.render`); what makes it live is `mam tail`'s feed (`mam.view.tail`).
"""
