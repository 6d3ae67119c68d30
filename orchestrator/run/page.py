"""The run's live page: on a campaign's board, or on a server of its own."""

from __future__ import annotations

from collections.abc import Callable

from orchestrator.web.feed import Board, RunFeed
from orchestrator.web.server import LINGER_S, WebServer, parse_address


def serve_page(feed: RunFeed, board: Board | None, web: str | None, token: str,
               event: Callable[..., None]) -> WebServer | None:
    """Show the run on ``board`` (a campaign's), or on a page of its own at ``web``
    (``HOST:PORT``; returned, to be ended by :func:`end_page`)."""
    page = None
    if board is None and web:
        host, port = parse_address(web)
        board = Board()
        page = WebServer(board, host, port, token=token)
        event("web", url=page.url.split("?")[0], explain=f"live page: {page.url}")
    if board is not None:
        board.run = feed
        board.ended_shown.clear()
    return page


def end_page(feed: RunFeed, page: WebServer | None, outcome: str) -> None:
    """Show the run's outcome; a page of its own stays a little while for its last readers,
    then closes."""
    feed.outcome = feed.label = outcome
    if page:
        page.board.linger(LINGER_S)
        page.close()
