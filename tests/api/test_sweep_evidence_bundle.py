"""`GET /model-sweeps/{id}/evidence`, `neens sweep export` and the bundle's verify.py, over real
sweeps on both databases: an exported bundle verifies offline with the standard library alone
(`python -I`), and stops verifying after any change of a byte of its answers or of a number of
its decision; a void sweep's bundle holds its void, never a ranking; a signed bundle verifies
with its key and fails when tampered with or checked with another key."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from neens_eval import cli
from sqlalchemy import text

from neens.api.schemas.sweep_evidence import EvidenceAnswerOut, EvidenceCaseOut, SweepEvidenceOut
from neens.demo.endpoints import PRICED_MODEL, Agent, Reply, Scripted, serve, serve_one
from neens.store import sweep_evidence as sweep_evidence_store
from neens.store.db import Database
from neens.store.keys import CreatedKey
from tests.api.test_sweep_decisions import AGENTS, USAGE, chat, sweep_of
from tests.api.test_sweeps import RIGHT, run_counter
from tests.support.bundles import rehash, verify_py
from tests.support.preprod import auth


async def _read(client: httpx.AsyncClient, key: CreatedKey, path: str) -> dict[str, Any]:
    r = await client.get(path, headers=auth(key))
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


async def _served(
    client: httpx.AsyncClient, key: CreatedKey, sweep_id: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    comparison = await _read(client, key, f"/model-sweeps/{sweep_id}/comparison")
    evidence = await _read(client, key, f"/model-sweeps/{sweep_id}/evidence")
    return comparison, evidence


def _export(
    monkeypatch: pytest.MonkeyPatch,
    sweep_id: str,
    comparison: dict[str, Any],
    evidence: dict[str, Any],
    out: Path,
    *extra: str,
) -> int:
    """`neens sweep export` against a loopback stand-in answering what the server answered."""
    fake = Scripted()
    fake.reply("GET", f"/model-sweeps/{sweep_id}/comparison", Reply(200, comparison))
    fake.reply("GET", f"/model-sweeps/{sweep_id}/evidence", Reply(200, evidence))
    with serve_one(fake):
        monkeypatch.setenv("NEENS_BASE_URL", fake.url)
        monkeypatch.setenv("NEENS_API_KEY", "nk_live_test")
        return cli.main(["sweep", "export", sweep_id, "--out", str(out), *extra])


async def test_an_exported_sweep_verifies_offline_and_any_changed_byte_or_number_fails_it(
    client: httpx.AsyncClient,
    admin_key: CreatedKey,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    big = {"prompt_tokens": 20_000, "completion_tokens": 4_000}
    flaky = run_counter(1, {"question 0"})
    with serve(
        Agent(RIGHT, wire="chat", path="/big", model="gpt-4o", usage=big, agent_name=AGENTS.get),
        Agent(flaky, wire="chat", path="/mini", model=PRICED_MODEL, usage=USAGE,
              agent_name=AGENTS.get),
        Agent(lambda p: "wrong" if p == "question 2" else RIGHT[p], path="/broken"),
    ) as agents:  # fmt: skip
        sweep = await sweep_of(
            client,
            admin_key,
            [
                ("incumbent", agents.url("/big"), chat(model="gpt-4o")),
                ("mini", agents.url("/mini"), chat(model=PRICED_MODEL)),
                ("broken", agents.url("/broken"), {}),
            ],
            gate={"min_pass_rate": 0.5},
        )
    comparison, evidence = await _served(client, admin_key, sweep["id"])
    # The evidence is every answer the comparison adds up: 3 arms x 3 runs x 4 items.
    assert len(evidence["answers"]) == 36 and len(evidence["cases"]) == 4
    assert {a["armId"] for a in evidence["answers"]} == {a["armId"] for a in comparison["arms"]}
    mini = next(a for a in comparison["arms"] if a["label"] == "mini")
    assert (mini["flakyItems"], mini["passHatK"], mini["passHatKItems"]) == (1, 0.75, 4)

    bundle = tmp_path / "bundle"
    assert _export(monkeypatch, sweep["id"], comparison, evidence, bundle) == 0
    names = {p.name for p in bundle.iterdir()} - {"items.parquet"}  # with pyarrow only
    assert names == {
        "cases.jsonl", "decision.json", "items.jsonl", "manifest.json", "sweep.json", "verify.py",
    }  # fmt: skip
    assert json.loads((bundle / "decision.json").read_text()) == comparison, "as served"
    ok = verify_py(bundle)
    assert ok.returncode == 0, ok.stderr
    assert "OK" in ok.stdout

    # Any one byte of items.jsonl changed: verification fails, naming the file.
    original = (bundle / "items.jsonl").read_bytes()
    for position in (0, len(original) // 2, len(original) - 2):
        changed = bytearray(original)
        changed[position] ^= 0x01
        (bundle / "items.jsonl").write_bytes(bytes(changed))
        failed = verify_py(bundle)
        assert failed.returncode != 0, position
        assert "items.jsonl" in failed.stderr
    (bundle / "items.jsonl").write_bytes(original)
    assert verify_py(bundle).returncode == 0

    # A verdict flipped in the answers, with the manifest forged to match: the numbers fail.
    rows = [json.loads(line) for line in original.decode().splitlines()]
    mine = [r for r in rows if r["armId"] == mini["armId"]]
    clean = next(
        r["itemId"] for r in mine if all(o["passed"] for o in mine if o["itemId"] == r["itemId"])
    )
    flipped = next(r for r in mine if r["itemId"] == clean)
    flipped["passed"] = False  # an item passed on every run becomes flaky
    (bundle / "items.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    rehash(bundle, "items.jsonl")
    forged = verify_py(bundle)
    assert forged.returncode == 1
    assert "arms[mini].passedItems" in forged.stderr or "arms[mini].flakyItems" in forged.stderr
    (bundle / "items.jsonl").write_bytes(original)
    rehash(bundle, "items.jsonl")

    # A number of the decision changed, manifest forged to match: named, and it fails.
    decision = json.loads((bundle / "decision.json").read_text())
    decision["arms"][1]["wilsonLow"] += 0.01
    decision["verdict"]["savingsUsd"] = 0
    (bundle / "decision.json").write_text(json.dumps(decision))
    rehash(bundle, "decision.json")
    wrong = verify_py(bundle)
    assert wrong.returncode == 1
    assert "decision.arms[mini].wilsonLow" in wrong.stderr
    assert "decision.verdict.savingsUsd" in wrong.stderr

    # A row that gives a key twice (a reader keeping the first value and one keeping the last
    # would count different verdicts), manifest forged to match: the bundle cannot be read.
    (bundle / "decision.json").write_text(json.dumps(comparison))
    rehash(bundle, "decision.json")
    lines = original.decode().splitlines()
    lines[1] = lines[1][:-1] + ', "passed": false}'
    (bundle / "items.jsonl").write_text("".join(line + "\n" for line in lines))
    rehash(bundle, "items.jsonl")
    twice = verify_py(bundle)
    assert twice.returncode == 2
    assert "items.jsonl line 2: the key 'passed' is given twice in one object" in twice.stderr
    (bundle / "items.jsonl").write_bytes(original)
    rehash(bundle, "items.jsonl")
    assert verify_py(bundle).returncode == 0

    # A file the manifest lists, gone: a mismatch naming it (exit 1), as docs/evidence.md says.
    (bundle / "cases.jsonl").rename(tmp_path / "cases.jsonl")
    missing = verify_py(bundle)
    assert missing.returncode == 1
    assert "cases.jsonl: listed in manifest.json, missing from the bundle" in missing.stderr
    (tmp_path / "cases.jsonl").rename(bundle / "cases.jsonl")

    # An out directory that is not empty is refused before anything is read.
    assert _export(monkeypatch, sweep["id"], comparison, evidence, bundle) == 2


async def test_a_void_sweeps_bundle_holds_its_void_and_no_ranking(
    client: httpx.AsyncClient,
    admin_key: CreatedKey,
    db: Database,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with serve(Agent(RIGHT, path="/a"), Agent(RIGHT, path="/b")) as agents:
        sweep = await sweep_of(
            client, admin_key, [("a", agents.url("/a"), {}), ("b", agents.url("/b"), {})]
        )
    async with db.write() as s:
        await s.execute(
            text("UPDATE preprod_runs SET version_label = :v WHERE id = :id"),
            {"v": "something else", "id": sweep["arms"][1]["runIds"][0]},
        )
    comparison, evidence = await _served(client, admin_key, sweep["id"])
    assert evidence["status"] == "void" and len(evidence["answers"]) == 24
    bundle = tmp_path / "void"
    assert _export(monkeypatch, sweep["id"], comparison, evidence, bundle) == 4
    assert "void" in capsys.readouterr().err
    decision = json.loads((bundle / "decision.json").read_text())
    assert decision["comparable"] is False and decision["leaderboard"] == []
    assert decision["winnerArmId"] is None and decision["frontier"] is None
    assert all(arm["rank"] is None for arm in decision["arms"])
    assert verify_py(bundle).returncode == 0

    # A ranking slipped into a void bundle is caught.
    decision["leaderboard"] = [decision["arms"][0]["armId"]]
    (bundle / "decision.json").write_text(json.dumps(decision))
    rehash(bundle, "decision.json")
    ranked = verify_py(bundle)
    assert ranked.returncode == 1 and "void" in ranked.stderr


async def test_a_signed_bundle_verifies_with_its_key_and_fails_tampered_or_with_another_key(
    client: httpx.AsyncClient,
    admin_key: CreatedKey,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with serve(Agent(RIGHT, path="/a"), Agent(run_counter(0, {"question 1"}), path="/b")) as a:
        sweep = await sweep_of(client, admin_key, [("a", a.url("/a"), {}), ("b", a.url("/b"), {})])
    comparison, evidence = await _served(client, admin_key, sweep["id"])
    keys = tmp_path / "keys"
    keys.mkdir()
    for name in ("signing", "other"):
        private = Ed25519PrivateKey.generate()
        (keys / f"{name}.pem").write_bytes(
            private.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        (keys / f"{name}.pub.pem").write_bytes(
            private.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )
    bundle = tmp_path / "signed"
    code = _export(
        monkeypatch, sweep["id"], comparison, evidence, bundle, "--sign", str(keys / "signing.pem")
    )
    assert code == 0
    envelope = json.loads((bundle / "manifest.dsse.json").read_text())
    assert envelope["payloadType"] == "application/vnd.in-toto+json"
    assert cli.main(["verify", str(bundle), "--key", str(keys / "signing.pub.pem")]) == 0
    assert cli.main(["verify", str(bundle)]) == 0, "without a key: the Statement and numbers"
    assert cli.main(["verify", str(bundle), "--key", str(keys / "other.pub.pem")]) == 1
    assert verify_py(bundle).returncode == 0

    # Tampered, manifest forged to match: verify.py alone cannot tell, the signature can.
    rows = (bundle / "cases.jsonl").read_text().replace("question 0", "question X")
    (bundle / "cases.jsonl").write_text(rows)
    rehash(bundle, "cases.jsonl")
    assert cli.main(["verify", str(bundle), "--key", str(keys / "signing.pub.pem")]) == 1
    assert cli.main(["verify", str(bundle)]) == 1, "the signed Statement no longer matches"

    # Bad input is a usage error, naming it.
    assert cli.main(["verify", str(tmp_path / "nowhere")]) == 2
    assert cli.main(["verify", str(bundle), "--key", str(keys / "signing.pem")]) == 2


async def test_the_evidence_is_streamed_in_batches_and_reads_as_every_row_at_once(
    client: httpx.AsyncClient, admin_key: CreatedKey, db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Read two rows at a time, so the cases and each arm's answers span several batches: the
    body is the one built from every row read at once, and no length is announced up front."""
    monkeypatch.setattr(sweep_evidence_store, "BATCH", 2)
    with serve(Agent(RIGHT, path="/one"), Agent(run_counter(1, {"question 0"}), path="/two")) as a:
        sweep = await sweep_of(
            client, admin_key, [("one", a.url("/one"), {}), ("two", a.url("/two"), {})], gate={}
        )
    r = await client.get(f"/model-sweeps/{sweep['id']}/evidence", headers=auth(admin_key))
    assert r.status_code == 200, r.text
    assert "content-length" not in r.headers
    streamed = r.json()

    async with db.read() as s:
        cases = await sweep_evidence_store.case_rows(s, sweep["datasetVersionId"])
        answers = [
            (arm["id"], row)
            for arm in sweep["arms"]
            for row in await sweep_evidence_store.answer_rows(s, arm["runIds"])
        ]
    assert len(cases) > 2 and len(answers) > 2 * len(cases)
    whole = SweepEvidenceOut(
        sweep_id=sweep["id"],
        status=streamed["status"],
        dataset_version_id=sweep["datasetVersionId"],
        arms=streamed["arms"],
        cases=[
            EvidenceCaseOut(
                item_id=c.item_id,
                position=c.position,
                input=c.input,
                expected_output=c.expected_output,
                metadata=dict(c.metadata or {}),
            )
            for c in cases
        ],
        answers=[
            EvidenceAnswerOut(
                arm_id=arm_id,
                item_id=row.item_id,
                run_id=row.run_id,
                session_id=row.session_id,
                status=row.status,
                scored=row.status == "scored",
                passed=row.passed,
                score=row.score,
                cost_usd=row.cost_usd,
                agent_name=row.agent_name,
                latency_ms=row.latency_ms,
                output=row.output,
            )
            for arm_id, row in answers
        ],
    )
    assert streamed == whole.model_dump(mode="json")
    assert list(streamed) == ["sweepId", "status", "datasetVersionId", "arms", "cases", "answers"]
