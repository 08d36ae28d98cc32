"""The catalog's id and its folder's (Store.check_folder pairs them), over each backend: the
first claim wins on each side, and reading claims nothing."""

from __future__ import annotations

import pytest

from gateway.store import errors
from tests.contract.conftest import Harness


def test_the_first_claim_of_an_id_wins_on_both_sides(harness: Harness) -> None:
    h = harness
    assert h.write(lambda tx: tx.claim_id(None)) == (None, [])
    assert h.run(h.store.files.catalog_id(None)) is None
    assert h.write(lambda tx: tx.claim_id("first")) == ("first", [])
    assert h.write(lambda tx: tx.claim_id("second")) == ("first", [])
    assert h.write(lambda tx: tx.claim_id(None)) == ("first", [])
    assert h.run(h.store.files.catalog_id("first")) == "first"
    assert h.run(h.store.files.catalog_id("second")) == "first"
    assert (h.root / "catalog-id").read_text() == "first\n"
    assert list((h.root / "tmp").iterdir()) == []
    # Paired: every later check passes, and changes nothing.
    h.run(h.store.check_folder())
    assert h.write(lambda tx: tx.claim_id(None)) == ("first", [])


def test_a_folder_paired_with_another_catalog_is_refused(harness: Harness) -> None:
    h = harness
    (h.root / "catalog-id").write_text("another\n")
    try:
        with pytest.raises(errors.StoreError, match=r"not this catalog's \(first\).*nothing"):
            h.run(h.store.check_folder())
        assert h.write(lambda tx: tx.claim_id(None)) == ("first", [])
    finally:
        (h.root / "catalog-id").write_text("first\n")
