"""The interactive API docs at `/docs`, served offline: Swagger UI's files come from the installed
`swagger-ui-bundle` package (no CDN), under `/docs/assets/`.

The page and its assets are static and public (they hold nothing of this server); the OpenAPI
document they load, `/openapi.json`, is not: with `--token` it needs the bearer token like every
route but /health. The page takes the token from the address's fragment, which a browser never
sends to the server (so it is in no access log):

    http://127.0.0.1:8000/docs#token=YOUR_TOKEN

and adds `Authorization: Bearer YOUR_TOKEN` to every request it makes (the document and "Try it
out"). Without a fragment the page still loads; on a server with a token it then shows the 401.

Does not cover: the document itself (FastAPI builds it; openapi_docs.py adds what this server
accepts). ReDoc is not served: it has no offline bundle here.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import HTMLResponse
from starlette.staticfiles import StaticFiles

DOCS_PATH = "/docs"
ASSETS_PATH = "/docs/assets"
ASSET_FILES = ("swagger-ui-bundle.js", "swagger-ui.css", "favicon-32x32.png")


def swagger_ui_dir() -> Path | None:
    """Where the installed swagger-ui-bundle keeps Swagger UI's files, or None if it is not installed."""
    try:
        import swagger_ui_bundle
    except ImportError:
        return None
    path = Path(swagger_ui_bundle.swagger_ui_path)
    return path if all((path / name).is_file() for name in ASSET_FILES) else None


def docs_page(title: str, openapi_url: str) -> str:
    """The HTML of /docs: Swagger UI from /docs/assets, the token taken from `#token=`."""
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{html.escape(title)} - API docs</title>
<link rel="stylesheet" href="{ASSETS_PATH}/swagger-ui.css">
<link rel="icon" type="image/png" href="{ASSETS_PATH}/favicon-32x32.png">
</head>
<body>
<div id="swagger-ui"></div>
<script src="{ASSETS_PATH}/swagger-ui-bundle.js"></script>
<script>
const fragment = new URLSearchParams(window.location.hash.slice(1));
const token = fragment.get("token");
window.ui = SwaggerUIBundle({{
  url: {json.dumps(openapi_url)},
  dom_id: "#swagger-ui",
  deepLinking: false,
  requestInterceptor: (request) => {{
    if (token) {{ request.headers["Authorization"] = "Bearer " + token; }}
    return request;
  }},
}});
</script>
</body>
</html>
"""


def install_docs(app: FastAPI) -> bool:
    """Serve /docs and its assets on `app` (built with `docs_url=None`). False, and no /docs route,
    when swagger-ui-bundle is not installed: `/openapi.json` is still served."""
    assets = swagger_ui_dir()
    if assets is None:
        return False
    page = docs_page(app.title, app.openapi_url or "/openapi.json")
    app.mount(ASSETS_PATH, StaticFiles(directory=assets), name="docs-assets")

    @app.get(DOCS_PATH, include_in_schema=False)
    async def docs() -> HTMLResponse:
        return HTMLResponse(page)

    return True


def is_public_docs_path(path: str) -> bool:
    """The docs page and its static assets: served without the bearer token."""
    return path == DOCS_PATH or path.startswith(ASSETS_PATH + "/")
