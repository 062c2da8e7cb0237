"""Issue 13, point 7: no credential reaches anything a run writes or shows.

Redaction used to match key names only, so `Authorization: Bearer ...` under `headers`, an
`AccountKey=` inside a connection string, SAS `sig=` tokens, `user:password@` in a URL and values
read from `${VAR}` went into run.json and report.html. Here one real run, through the real `ylink`
command, reads its input from a real HTTP server on 127.0.0.1 by a URL that carries a user,
a password and a SAS signature, with credentials of every shape planted in its storage options;
then every file of the output folder and everything the commands printed is searched for them.
"""
from __future__ import annotations

import inspect
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

import ylink_data
from ylink_data.engine.config import load_config
from ylink_data.core.errors import InputError, RunStateError
from ylink_data.io.listing import expand_paths
from ylink_data.report.gather import gather, thresholds
from ylink_data.core.redaction import MASK, redact, redact_text, redact_url

from ..conftest import REPO, SAMPLES
from ..httpserver import FileServer

WARC = "CC-MAIN-2020-34-excerpt.warc.gz"  # 16 pages, one of them English
AZURE_KEY = "Yl1nkPlantedAzureAccountKey" + "Q" * 59 + "=="  # 86 base64 characters and "=="

# Credentials read from the environment through ${VAR}; the opaque one has no telltale shape or
# key name, so only remembering what ${VAR} expanded to can catch it.
ENV = {
    "YLINK_T_OPAQUE": "opaque-credential-4f1c9e",
    "YLINK_T_AWS_KEY": "AKIAYLINKTESTPLANTED",
    "YLINK_T_AWS_SECRET": "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",
    "YLINK_T_BEARER": "bearer-from-env-77aa11",
}
# Written into the pipeline file itself.
LITERAL = [
    "input-user-planted", "input-pw-planted", "sas-sig-planted-55",  # the input URL
    "s3admin", "endpoint-pw-73",  # user:password@ in endpoint_url
    "bearer-literal-9d8c7b6a", "bearer-free-text-1a2b3c4d",
    "azkey-planted-xyz", AZURE_KEY, "sas-sig-in-options-66", "ss-signature-planted",
    "ghp_" + "P" * 36, "github_pat_" + "Q" * 30, "sk-proj-" + "R" * 30,
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ5bGluayJ9.c2lnbmF0dXJlLXBsYW50ZWQ", "xoxb-123456789012-plantedslack",
]
SECRETS = [*ENV.values(), *LITERAL]
# Settings that are not credentials and must still be shown.
PUBLIC = ["objects.example.com:9000", "eu-west-3", "AccountName=ylinkacct", "sv=2022-11-02", "127.0.0.1"]


def _storage() -> dict:
    return {
        "http": {"headers": {"X-Request-Note": "${YLINK_T_OPAQUE}"}},  # sent to the server on every request
        "https": {"headers": {"Authorization": "Bearer bearer-literal-9d8c7b6a"}},
        "s3": {"endpoint_url": "https://s3admin:endpoint-pw-73@objects.example.com:9000",
               "key": "${YLINK_T_AWS_KEY}", "secret": "${YLINK_T_AWS_SECRET}", "region_name": "eu-west-3",
               "client_kwargs": {"headers": {"X-Trace": "Authorization: Bearer bearer-free-text-1a2b3c4d",
                                             "X-Session": "Bearer ${YLINK_T_BEARER}"}}},
        "abfs": {"connection_string": f"DefaultEndpointsProtocol=https;AccountName=ylinkacct;AccountKey={AZURE_KEY};"
                                      "EndpointSuffix=core.windows.net",
                 "conn": "AccountName=ylinkacct;AccountKey=azkey-planted-xyz;"
                         "SharedAccessSignature=ss=b&sig=ss-signature-planted",
                 "account_url": "https://ylinkacct.blob.core.windows.net/c"
                                "?sv=2022-11-02&sp=rl&sig=sas-sig-in-options-66"},
        "gs": {"project": "ylink-test", "labels": LITERAL[-5:]},
    }


def _ylink(*args: str, env: dict) -> subprocess.CompletedProcess:
    # A wide console: a secret wrapped over two lines would hide from the search below.
    return subprocess.run([sys.executable, "-m", "ylink_data.cli", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "RAY_AUTH_MODE": "disabled", "COLUMNS": "1000", **env})


def _everything_under(folder: Path) -> dict[str, str]:
    """Each file's text: Parquet decoded (its pages are compressed), every other file as it is."""
    out = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        text = path.read_bytes().decode("utf-8", "replace")
        if path.suffix == ".parquet":
            table = pq.read_table(path)
            text += json.dumps(table.to_pylist(), default=str) + str(table.schema.metadata)
        out[str(path.relative_to(folder))] = text
    return out


def test_no_credential_reaches_output_files_or_console(ray_session, tmp_path):
    served = tmp_path / "served"
    served.mkdir()
    shutil.copy(SAMPLES / WARC, served / WARC)
    broken = (SAMPLES / "CC-MAIN-2024-22-whirlwind.warc.gz").read_bytes()[:12000]  # its one page cut short
    (served / "broken.warc.gz").write_bytes(broken)
    out = tmp_path / "out"
    with FileServer(served) as server:
        def secret_url(name: str, query: str = "?sv=2022-11-02&sig=sas-sig-planted-55") -> str:
            return server.url(name).replace("http://", "http://input-user-planted:input-pw-planted@") + query

        pipeline = tmp_path / "pipeline.yaml"
        pipeline.write_text(yaml.safe_dump({
            "name": "secrets", "input": {"paths": [secret_url(WARC), secret_url("broken.warc.gz")]},
            "output": {"path": str(out), "keep_rejected": True},
            "stages": [{"extract": {}}, {"langid": {"languages": ["en"], "min_score": 0.5}}],
            "storage": _storage()}))
        address = ray_session.get_runtime_context().gcs_address
        shown = []
        for args in (["validate", str(pipeline)],
                     ["run", str(pipeline), "--no-progress", "--set", f"ray.address={address}"],
                     ["inspect", str(out), "--limit", "2"],
                     ["report", str(out)],
                     ["inspect", secret_url(WARC, query=""), "--limit", "2"]):
            proc = _ylink(*args, env=ENV)
            assert proc.returncode == 0, proc.stderr
            shown.append(proc.stdout + proc.stderr)
        # Errors: a missing input (fsspec names the URL) and a bad storage value read from ${VAR}.
        missing = tmp_path / "missing.yaml"
        missing.write_text(pipeline.read_text().replace(WARC, "missing.warc.gz"))
        bad = tmp_path / "bad.yaml"
        bad.write_text(yaml.safe_dump({"input": {"paths": [str(SAMPLES / WARC)]}, "output": {"path": str(out)},
                                       "storage": {"s3": "${YLINK_T_OPAQUE}"}}))
        for path in (missing, bad):
            proc = _ylink("validate", str(path), env=ENV)
            assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
            shown.append(proc.stderr)
        source = secret_url(WARC)

    files = _everything_under(out)
    assert {"run.json", "manifest.json", "stats.json", "report.html"} <= set(files)
    assert any(name.startswith("quarantine/") for name in files) and any(name.startswith("rejected/") for name in files)
    assert any(name.startswith("data/") for name in files)
    for where, text in [*files.items(), *(("console", s) for s in shown)]:
        leaked = [s for s in SECRETS if s in text]
        assert not leaked, f"{where} shows {leaked}"

    info = files["run.json"]
    for value in PUBLIC:
        assert value in info, f"run.json lost the setting {value!r}"
    assert "missing.warc.gz" in shown[-2] and "storage.s3" in shown[-1]
    # The source column and the quarantine name the input by its URL without credentials.
    expected = source.replace("input-user-planted:input-pw-planted", MASK).replace("sas-sig-planted-55", MASK)
    sources = set(pq.read_table(out / "data").column("source").to_pylist())
    assert sources == {expected}
    quarantined = [json.loads(line) for name, text in files.items() if name.startswith("quarantine/")
                   for line in text.splitlines()]
    assert [q["file"] for q in quarantined] == [expected.replace(WARC, "broken.warc.gz")]


# ----------------------------------------------------------------------------- each shape alone


@pytest.mark.parametrize("text, secret", [
    ("https://user:hunter2pw@host.example/x", "hunter2pw"),
    ("s3://AKIDEXAMPLE:wJalrSecret@bucket/key", "wJalrSecret"),
    ("https://u:p@ss-word@host/x", "ss-word"),  # an unescaped @ in the password
    ("https://acct.blob.core.windows.net/c?sv=2022-11-02&sp=rl&sig=Zm9vYmFy%2Bsig", "Zm9vYmFy"),
    ("https://b.s3.amazonaws.com/k?X-Amz-Credential=AKIDX%2F2024&X-Amz-Signature=f00dfeed", "f00dfeed"),
    ("https://b.s3.amazonaws.com/k?X-Amz-Credential=AKIDXCRED%2F2024", "AKIDXCRED"),
    ("https://api.example/v1?access_token=tok3n-value&page=2", "tok3n-value"),
    ("DefaultEndpointsProtocol=https;AccountName=a;AccountKey=c2VjcmV0a2V5==;EndpointSuffix=x", "c2VjcmV0a2V5"),
    ("BlobEndpoint=https://a.blob.core.windows.net/;SharedAccessSignature=sv=2022&sig=c2lnbmF0", "c2lnbmF0"),
    ("Authorization: Bearer abc.def-ghi_jkl", "abc.def-ghi_jkl"),
    ("Authorization: Basic dXNlcjpwYXNzd29yZA==", "dXNlcjpwYXNzd29yZA=="),
    ("id AKIAIOSFODNN7EXAMPLE in text", "AKIAIOSFODNN7EXAMPLE"),
    ("ASIAY34FZKBOKMUTVV7A", "ASIAY34FZKBOKMUTVV7A"),
    ("token ghp_" + "a1" * 18, "ghp_" + "a1" * 18),
    ("github_pat_11ABCDEFG0123456789_abcdefghijklmnop", "github_pat_11ABCDEFG0123456789_abcdefghijklmnop"),
    ("key sk-proj-Abc123Def456Ghi789Jkl012", "sk-proj-Abc123Def456Ghi789Jkl012"),
    ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjMifQ.SflKxwRJSMeKKF2QT4fwpM", "eyJhbGciOiJIUzI1NiJ9"),
    ("slack xoxp-1234567890-abcdefghij", "xoxp-1234567890-abcdefghij"),
    (f"azure key {AZURE_KEY}", AZURE_KEY),
    ("-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBg\n-----END PRIVATE KEY-----", "MIIEvQIBADANBg"),
])
def test_each_shape_is_masked(text, secret):
    masked = redact_text(text)
    assert secret not in masked and MASK in masked


def test_values_from_the_environment_are_masked_anywhere():
    known = ["opaque-4f1c9e"]
    assert redact_text("cannot reach http://h/?x=opaque-4f1c9e now", known) == f"cannot reach http://h/?x={MASK} now"
    assert redact({"endpoint": "https://opaque-4f1c9e.example"}, known) == {"endpoint": f"https://{MASK}.example"}


def test_secret_key_names_mask_the_whole_value():
    config = {"headers": {"Authorization": "anything at all", "X-Api-Key": "k", "Accept": "text/html"},
              "AccountKey": "v", "sas_token": "?sv=1", "aws_secret_access_key": "s", "session_token": "t",
              "password": None, "tokenizer": "gpt2.json", "max_tokens": 512, "keep_rejected": True}
    assert redact(config) == {
        "headers": {"Authorization": MASK, "X-Api-Key": MASK, "Accept": "text/html"},
        "AccountKey": MASK, "sas_token": MASK, "aws_secret_access_key": MASK, "session_token": MASK,
        "password": None, "tokenizer": "gpt2.json", "max_tokens": 512, "keep_rejected": True}


@pytest.mark.parametrize("text", [
    "https://example.com/a/b.warc.gz?page=2&lang=en#top",
    "s3://bucket/key=1/token=abc/part-00000.parquet",  # Hive partitions are paths, not credentials
    "http://127.0.0.1:8000/crawl/CC-MAIN-2024-22.warc.gz",
    "/data/runs/out/quarantine/phase0-task-00001.jsonl",
    "mailto-like alice@example.com and user@host",
    "Basic rules apply; the Token was short; task-12345 and desk-abcdefghijklmnopqrstuvwxyz",
    "sha256 3f79bb7b435b05321651daefd374cdc681dc06faa65e374e38337b88ca046dea",
    "output.keep_rejected: unknown key; did you mean 'keep_rejected'?",
    "中文网页 https://zh.wikipedia.org/wiki/首页",
])
def test_ordinary_text_and_urls_are_unchanged(text):
    assert redact_text(text) == text
    assert redact_url(text) == text


# ----------------------------------------------------------------------------- inputs named alike
# Inputs were deduplicated by their URL without credentials, which also hides `key=`: a download
# API's `?key=a.jsonl` and `?key=b.jsonl` became one `?key=***`, and one file was dropped without a
# word (read, the two would have had the same ids). URLs that differ only in credentials are one file.


def test_inputs_alike_once_redacted_are_refused_unless_only_credentials_differ(tmp_path):
    served = tmp_path / "served"
    served.mkdir()
    shutil.copy(SAMPLES / WARC, served / "get")
    with FileServer(served) as server:
        url = server.url("get")
        with pytest.raises(InputError) as refused:
            expand_paths([f"{url}?key=a.warc.gz", f"{url}?key=b.warc.gz"], lambda _: {})
        message = str(refused.value)
        assert "same ids" in message and f"?key={MASK}" in message and "a.warc.gz" not in message, message

        def signed(user: str, sig: str) -> str:
            return url.replace("http://", f"http://{user}@") + f"?sv=2022-11-02&sig={sig}"

        rotated = expand_paths([signed("reader:pw-one", "sig-one"), signed("reader:pw-two", "sig-two")], lambda _: {})
        assert len(rotated) == 1 and redact_url(rotated[0].url) == redact_url(signed("reader:pw-one", "sig-one"))


def test_a_rerun_with_credentials_in_its_config_resumes_and_names_only_what_changed(ray_session, tmp_path,
                                                                                     monkeypatch, capfd):
    """run.json holds the fingerprinted configuration redacted, and the refusal's "changed:" list
    compared it with the configuration as read: an op parameter holding a credential always counted
    as changed. The fingerprint itself is of the configuration as read, the same on every run."""
    monkeypatch.setenv("YLINK_T_STORAGE_KEY", "storage-key-planted-31")
    out = tmp_path / "run"
    cfg = {"name": "creds", "input": {"paths": [str(SAMPLES / WARC)]},
           "output": {"path": str(out), "shard_bytes": 1 << 20},
           "stages": [{"url_filter": {"blocked_urls": ["https://reader:list-pw-planted@lists.example/private"]}}],
           "storage": {"s3": {"key": "${YLINK_T_STORAGE_KEY}"}}}
    ylink_data.run(cfg, progress=False)
    written = (out / "run.json").read_text()
    assert "list-pw-planted" not in written and "storage-key-planted-31" not in written

    capfd.readouterr()
    ylink_data.run(cfg, progress=False)
    assert "already complete (same configuration)" in capfd.readouterr().err

    changed = {**cfg, "output": {**cfg["output"], "shard_bytes": 2 << 20}}
    with pytest.raises(RunStateError, match=r"a different configuration \(changed: output\) and --no-reuse"):
        ylink_data.run(changed, progress=False, reuse=False)


def test_the_report_keeps_the_thresholds_of_a_run_whose_parameters_redaction_masked(ray_session, tmp_path,
                                                                                    monkeypatch):
    """The report rebuilds the run's ops from run.json, where parameters are redacted: with R2's
    `region_name: auto` read from the environment, every "auto" is masked, gopher_quality's
    `language: auto` included. Its thresholds are still the run's: they are numbers, masked only
    under a secret-looking name, and no op parameter has one."""
    from ylink_data.core.redaction import is_secret_key
    from ylink_data.ops import REGISTRY, load_ops

    load_ops()
    assert len(REGISTRY) >= 12 and not [f"{name}.{p}" for name, cls in REGISTRY.items()
                                        for p in inspect.signature(cls.__init__).parameters if is_secret_key(p)]
    monkeypatch.setenv("YLINK_T_REGION", "auto")
    cfg = {"name": "masked", "input": {"paths": [str(SAMPLES / WARC)]}, "output": {"path": str(tmp_path / "run")},
           "stages": [{"extract": {}}, {"gopher_quality": {"annotate": True}}],
           "storage": {"s3": {"region_name": "${YLINK_T_REGION}"}}}
    out, _ = ylink_data.run(cfg, progress=False)
    assert '"language": "***"' in (tmp_path / "run" / "run.json").read_text()

    data = gather(ylink_data.open_run(out))
    as_read = {"fingerprinted": {"stages": [[name, params] for name, params in load_config(cfg).ops]}}
    expected = thresholds(as_read, list(data.numeric))
    assert expected and data.thresholds == expected


def test_the_report_redacts_the_quarantine_entries_it_shows_of_an_older_run(ray_session, tmp_path):
    """Workers redact quarantine entries as they write them; a run written before that may hold
    credentials, and the report shows its first entries redacted (and counts them all)."""
    cfg = {"name": "older", "input": {"paths": [str(SAMPLES / WARC)]}, "output": {"path": str(tmp_path / "run")},
           "stages": []}
    out, _ = ylink_data.run(cfg, progress=False)
    # an older ylink's manifest listed no rejected/ nor quarantine/ files: its quarantine/ is read as it is
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    (tmp_path / "run" / "manifest.json").write_text(json.dumps({k: v for k, v in manifest.items()
                                                               if k not in ("rejected", "quarantine")}))
    (tmp_path / "run" / "quarantine").mkdir(exist_ok=True)
    entry = {"file": "https://reader:old-pw-planted@host.example/a.warc.gz", "offset": 7, "stage": "read",
             "reason": "unreadable", "error": "GET https://host.example/a?sig=old-sig-planted failed"}
    (tmp_path / "run" / "quarantine" / "phase0-task-99999.jsonl").write_text(json.dumps(entry) + "\n")

    data = gather(ylink_data.open_run(out))
    shown = json.dumps(data.quarantine)
    assert "old-pw-planted" not in shown and "old-sig-planted" not in shown and "host.example" in shown
    assert data.quarantine_counts[("read", "unreadable")] >= 1


def test_special_tokens_of_a_tokenizer_are_not_secrets():
    """`eod_token: "<|endoftext|>"` names vocabulary, not a credential: kept in run.json and the
    report; a token that is a credential under any other name is still masked."""
    from ylink_data.core.redaction import is_secret_key, redact

    assert not any(is_secret_key(k) for k in ("eod_token", "bos_token", "eosToken", "pad_token", "special_tokens"))
    assert all(is_secret_key(k) for k in ("token", "access_token", "refresh_token", "auth_token", "sas_token",
                                          "eod_token_secret"))
    assert redact({"eod_token": "<|endoftext|>", "access_token": "abc123"}) == {
        "eod_token": "<|endoftext|>", "access_token": "***"}
