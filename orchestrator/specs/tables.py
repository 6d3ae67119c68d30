"""The names of the source documents' tables surge prints (``surge table NAME``, a campaign's
``tables:``); :mod:`results.documents` builds each."""

from typing import Literal

DocumentTable = Literal["000-table1", "000-table2", "003-round-trips", "003-results", "004-cost",
                        "004-split", "002-spread"]
"""A document table's name: the document's number, then which of its tables."""
