"""The pages' application, mounted at `/ui` by `neens.api.app.create_app`.

A separate application rather than more routes on the API's: the API's guards (JSON bodies
only, unknown query parameters refused) and its JSON error shape are right for programs and
wrong for a browser, the pages stay out of the OpenAPI contract, and no page path can shadow an
API path. The pages share the API's state (database, settings, workers) and call its routes'
own functions, so they answer what the API answers.
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.datastructures import State
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Receive, Scope, Send

from neens.api.errors import validation_error_body
from neens.api.middleware import ErrorEnvelopeMiddleware, unstorable_parameter
from neens.errors import NeensError
from neens.web.guard import SIGN_IN, FormRefused, SignInRequired, clear_session_cookie
from neens.web.render import environment, query, render
from neens.web.routers import auth, compare, datasets, insights, preprod, sessions, share, sweeps

ROUTERS = (auth, preprod, compare, sweeps, datasets, sessions, insights, share)

TITLES = {
    400: "Bad request",
    401: "Not signed in",
    403: "Not allowed",
    404: "Not found",
    405: "Method not allowed",
    409: "Conflict",
    410: "Gone",
    413: "Too large",
    415: "Unsupported form",
    422: "Cannot do that",
}


def error_page(request: Request, status: int, message: str) -> Response:
    return render(
        request,
        "error.html",
        None,
        status_code=status,
        title=TITLES.get(status, "Error"),
        status=status,
        message=message,
    )


class UnstorablePageParameters:
    """A NUL character in a page's path (404) or query (422 naming it), answered as a page
    before any route or the static files see it: the API's rule (`UnstorableParameterMiddleware`),
    which leaves `/ui` to this."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        error = unstorable_parameter(scope) if scope["type"] == "http" else None
        if error is None:
            await self.app(scope, receive, send)
            return
        response = error_page(Request(scope), error.status_code, error.message)
        await response(scope, receive, send)


def create_web_app(shared: State) -> FastAPI:
    """The pages, reading the database, settings and worker from the API's `shared` state."""
    app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)
    app.state.shared = shared
    app.state.templates = environment()
    app.add_middleware(UnstorablePageParameters)
    # Outside the pages' own handlers but inside this app's Starlette fallback, which would
    # answer plain text: an unexpected failure is logged with an id and answered as a page.
    app.add_middleware(ErrorEnvelopeMiddleware)
    app.mount("/static", StaticFiles(packages=[("neens.web", "static")]), name="static")
    for module in ROUTERS:
        app.include_router(module.router)

    @app.exception_handler(SignInRequired)
    async def _sign_in(request: Request, exc: SignInRequired) -> Response:
        target = exc.next_path if request.method in ("GET", "HEAD") else None
        response = RedirectResponse(SIGN_IN + query(next=target), status_code=303)
        if exc.clear:
            clear_session_cookie(response, request)
        return response

    @app.exception_handler(FormRefused)
    async def _refused(request: Request, exc: FormRefused) -> Response:
        return error_page(request, 403, str(exc))

    @app.exception_handler(NeensError)
    async def _neens_error(request: Request, exc: NeensError) -> Response:
        return error_page(request, exc.status_code, exc.message)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> Response:
        status, body = validation_error_body(request, exc)
        return error_page(request, status, body["error"]["message"])

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
        message = "There is no page at this address." if exc.status_code == 404 else exc.detail
        return error_page(request, exc.status_code, str(message))

    return app
