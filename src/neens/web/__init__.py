"""The pages `neens serve` serves under `/ui/`: server-rendered (Jinja2, autoescape on), every
asset from this package, so they work offline.

Each page renders the response of its JSON twin, the API route that answers the same data
(`GET /ui/preprod-evals/ppr_…` renders what `GET /preprod-evals/ppr_…` answers), by calling that
route's own function with the signed-in key's principal: a page cannot compute a number of its
own, or see what the key could not read through the API. Pages live under `/ui/` so that no page
path can ever shadow an API path (docs/pages.md).

- `app`: the pages' application, mounted at `/ui` by `neens.api.app.create_app`.
- `cookies`: the signed session cookie (a key id and a CSRF token, never the key).
- `guard`: who is signed in, on every request, and the CSRF and Origin checks of every form.
- `render`: the template environment and the headers every page answers with.
- `formats`: how values are written ("no data", "unpriced", never 0), and status colours.
- `nav`: the header's navigation; an area adds its entry there.
- `new_run`: the New pre-prod eval form's offer, defaults and request body.
- `routers/`: one module per area (auth, datasets, sessions, preprod, compare, insights);
  `templates/` mirrors them (`base.html` is the layout, `macros.html` the shared pieces) and
  `static/` holds the one stylesheet and the one script.

A new area (the sweep pages) adds a router module here, its templates in a folder of its own
extending `base.html`, and a `nav.NAV` entry; its pages render its twins' route functions.
"""
