"""ms_gen_key: the manual's printed lines, exports, single-file output, library API."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import yaml

from raims_node.config import gen_key, tree
from raims_node.config.errors import ConfigError, KeyConfigError
from raims_node.config.keyset import ServiceKeys, credentials, read_secrets
from raims_node.crypto.credentials import Signer
from raims_node.crypto.keys import PublicKeys, b64decode, verify_user

# The manual's "Key Configuration" section, verbatim.
MANUAL_CREATE = """\
create dir  config                          -- the configure directory
create file config/.salt                    -- generate new salt
create file config/.pass                    -- generated a new password
create file config/config.yaml              -- base include file
create file config/param.yaml               -- parameters file
create file config/svc_test.yaml            -- defines the service and signs users
create file config/user_A_svc_test.yaml     -- defines the user
create file config/user_B_svc_test.yaml     -- defines the user
create file config/user_C_svc_test.yaml     -- defines the user
"""
MANUAL_EXPORT_HEAD = """\
- Loading service "test"
- Signatures ok
"""
MANUAL_EXPORT_ONE = """\
create dir  {u}                          -- exported configure directory
create file {u}/.salt                    -- a copy of salt
create file {u}/.pass                    -- generated a new password
create file {u}/param.yaml               -- a copy of param
create file {u}/config.yaml              -- base include file
create file {u}/svc_test.yaml            -- defines the service and signs users
create file {u}/user_A_svc_test.yaml     -- defines the user
create file {u}/user_B_svc_test.yaml     -- defines the user
create file {u}/user_C_svc_test.yaml     -- defines the user
"""
MANUAL_SINGLE = """\
create dir  config                   -- the configure directory
create file config/.salt             -- generate new salt
create file config/.pass             -- generated a new password
create file config/config.yaml       -- base include file
create file config/param.yaml        -- parameters file
create file config/svc_test.yaml     -- defines the service and signs users
OK? done
- Output config to "test.yaml"
"""
MANUAL_RVD = """\
create dir  config                  -- the configure directory
create file config/.salt            -- generate new salt
create file config/.pass            -- generated a new password
create file config/config.yaml      -- base include file
create file config/param.yaml       -- parameters file
create file config/svc_rvd.yaml     -- defines the service and signs users
done
- Output config to "rv.yaml"
"""


def run(*argv: str, answer: str = "y\n") -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = gen_key.run(list(argv), out, err, io.StringIO(answer))
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def master(cwd: Path) -> Path:
    code, out, _ = run("-u", "A", "B", "C", "-s", "test")
    assert code == 0
    return cwd / "config"


def test_create_prints_the_manuals_lines(cwd: Path) -> None:
    code, out, err = run("-u", "A", "B", "C", "-s", "test")
    assert code == 0, err
    assert out == MANUAL_CREATE + "OK? done\n"
    files = sorted(p.name for p in (cwd / "config").iterdir())
    assert files == sorted([".salt", ".pass", "config.yaml", "param.yaml", "svc_test.yaml",
                            "user_A_svc_test.yaml", "user_B_svc_test.yaml", "user_C_svc_test.yaml"])
    t = tree.load_dir(cwd / "config")
    assert t.parameters["pass"] == ".pass" and t.parameters["salt"] == ".salt"
    assert len(b64decode((cwd / "config" / ".salt").read_text())) == 640
    keys = ServiceKeys.from_tree(t, "test")
    assert keys.pair is not None
    assert sorted(keys.users) == ["A", "B", "C"]
    assert all(u.pair is not None for u in keys.users.values())
    # private keys are not in the files in clear
    svc_doc = yaml.safe_load((cwd / "config" / "svc_test.yaml").read_text())
    assert svc_doc["services"][0]["pri"] != keys.pair.to_bytes()


def test_answer_no_aborts_without_files(cwd: Path) -> None:
    code, out, err = run("-u", "A", "-s", "test", answer="n\n")
    assert code == 1
    assert err == "aborting: nothing written (answer y, or run with -y)\n"
    assert not (cwd / "config").exists()


def test_service_is_required(cwd: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:  # a usage error, as argparse's own
        run("-u", "A")
    assert e.value.code == 2 and "-s SVC" in capsys.readouterr().err
    assert gen_key.main(["-u", "A", "-s", "bad/name"]) == 1


@pytest.mark.parametrize("user", ["*", ">", "a.b", ""])
def test_a_user_name_that_is_no_subject_token_is_refused(cwd: Path, user: str,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    assert gen_key.main(["-u", user, "-s", "test", "-y"]) == 1
    assert f"user name {user!r} must be" in capsys.readouterr().err
    assert not (cwd / "config").exists()


def test_export_prints_the_manuals_lines_and_keeps_only_own_key(master: Path, cwd: Path) -> None:
    code, out, err = run("-x", "A", "B", "C", "-s", "test", answer="y\n")
    assert code == 0, err
    expected = MANUAL_EXPORT_HEAD + "".join(MANUAL_EXPORT_ONE.format(u=u) for u in "ABC") + "OK? done\n"
    assert out == expected
    master_keys = ServiceKeys.from_tree(tree.load_dir(master), "test")
    for user in "ABC":
        d = cwd / user
        assert (d / ".salt").read_text() == (master / ".salt").read_text()
        assert (d / ".pass").read_text() != (master / ".pass").read_text()
        t = tree.load_dir(d)
        assert all(s.pri is None for s in t.services)
        assert [u.user for u in t.users if u.pri is not None] == [user]
        keys = ServiceKeys.from_tree(t, "test")
        assert keys.pair is None
        assert keys.users[user].pair is not None
        assert keys.users[user].pair.to_bytes() == master_keys.users[user].pair.to_bytes()  # type: ignore[union-attr]
        assert keys.pub == master_keys.pub
        cred = credentials(t, f"{user}.test")
        assert cred.signer is Signer.USER and cred.user == user
        # this node cannot sign new users
        with pytest.raises(KeyConfigError, match="no private key"):
            keys.add_user("Z")
        # the master password does not open the exported key
        (d / ".pass").write_text((master / ".pass").read_text())
        with pytest.raises(KeyConfigError, match=r"\.pass.*\.salt"):
            ServiceKeys.from_tree(tree.load_dir(d), "test")


def test_export_of_unknown_user_fails(master: Path) -> None:
    assert gen_key.main(["-x", "Z", "-s", "test", "-d", str(master)]) == 1


def test_adding_a_user_signs_with_the_existing_service_key(master: Path) -> None:
    before = ServiceKeys.from_tree(tree.load_dir(master), "test")
    code, out, err = run("-u", "D", "-s", "test", "-y")
    assert code == 0, err
    assert out.splitlines() == [
        '- Loading service "test"',
        "- Signatures ok",
        "update file config/svc_test.yaml            -- defines the service and signs users",
        "create file config/user_D_svc_test.yaml     -- defines the user",
        "done",
    ]
    after = ServiceKeys.from_tree(tree.load_dir(master), "test")
    assert after.pub == before.pub
    d = after.users["D"]
    assert verify_user(before.pub, "test", "D", d.create, d.expires, d.pub, d.signature)
    for u in "ABC":  # the other users are untouched
        assert (after.users[u].pub, after.users[u].sealed) == (before.users[u].pub, before.users[u].sealed)
    # nothing to do the second time
    code, out, _ = run("-u", "D", "-s", "test", "-y")
    assert out.splitlines()[-1] == "no changes"


def test_single_file_output_loads_like_the_directory(cwd: Path) -> None:
    code, out, err = run("-s", "test", "-o", "test.yaml")
    assert code == 0, err
    assert out == MANUAL_SINGLE
    d = tree.load_dir(cwd / "config")
    f = tree.load_file(cwd / "test.yaml")
    assert (f.services, f.users, f.transports) == (d.services, d.users, d.transports)
    assert read_secrets(f) == read_secrets(d)
    assert ServiceKeys.from_tree(f).pair.to_bytes() == ServiceKeys.from_tree(d).pair.to_bytes()  # type: ignore[union-attr]


def test_rvd_example_has_no_prompt_with_y(cwd: Path) -> None:
    code, out, _ = run("-y", "-s", "rvd", "-o", "rv.yaml")
    assert code == 0
    assert out == MANUAL_RVD
    doc = yaml.safe_load((cwd / "rv.yaml").read_text())
    assert list(doc) == ["services", "parameters"]
    assert doc["services"][0]["svc"] == "rvd"
    assert set(doc["services"][0]) == {"svc", "create", "pri", "pub"}
    assert set(doc["parameters"]) == {"salt_data", "pass_data"}
    assert (cwd / "rv.yaml").stat().st_mode & 0o777 == 0o600  # the keys and what opens them: owner only
    # rv.yaml alone (no .salt/.pass next to it) holds everything needed
    (cwd / "elsewhere").mkdir()
    (cwd / "elsewhere" / "rv.yaml").write_text((cwd / "rv.yaml").read_text())
    cred = credentials(tree.load_file(cwd / "elsewhere" / "rv.yaml"), "host1", "rvd")
    assert cred.signer is Signer.SERVICE


def test_keys_cannot_be_read_without_pass_or_salt(master: Path) -> None:
    (master / ".pass").rename(master / "pass.bak")
    with pytest.raises(KeyConfigError, match=r"password file .*\.pass' is missing"):
        ServiceKeys.from_tree(tree.load_dir(master))
    (master / "pass.bak").rename(master / ".pass")
    (master / ".salt").unlink()
    with pytest.raises(KeyConfigError, match=r"salt file .*\.salt' is missing"):
        ServiceKeys.from_tree(tree.load_dir(master))
    with pytest.raises(KeyConfigError, match="set salt_data"):
        ServiceKeys.from_tree(tree.load_text((master / "svc_test.yaml").read_text()))


def test_tampered_user_signature_is_rejected(master: Path) -> None:
    path = master / "user_B_svc_test.yaml"
    doc = yaml.safe_load(path.read_text())
    other = PublicKeys.from_b64(yaml.safe_load((master / "user_C_svc_test.yaml").read_text())["users"][0]["pub"])
    doc["users"][0]["pub"] = other.to_b64()
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(KeyConfigError, match=r"user_B_svc_test.yaml:2: user: signature of user 'B' does not verify"):
        ServiceKeys.from_tree(tree.load_dir(master))
    assert gen_key.main(["-x", "A", "-s", "test", "-d", str(master)]) == 1


def test_unsigned_user_is_rejected(master: Path) -> None:
    doc = yaml.safe_load((master / "svc_test.yaml").read_text())
    del doc["services"][0]["users"]["C"]
    (master / "svc_test.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    with pytest.raises(KeyConfigError, match="user 'C' is not signed by service 'test'"):
        ServiceKeys.from_tree(tree.load_dir(master))


def test_library_new_network_config_and_export() -> None:
    data = gen_key.new_network_config("spark", ["n1", "n2", "n3"])
    assert list(data) == ["services", "users", "parameters"]
    t = tree.from_dict(data)
    keys = ServiceKeys.from_tree(t, "spark")
    assert keys.pair is not None and sorted(keys.users) == ["n1", "n2", "n3"]
    assert tree.load_text(tree.dump_yaml(data)) == t
    exported = gen_key.export_user_config(data, "n2")
    et = tree.from_dict(exported)
    assert exported["parameters"]["salt_data"] == data["parameters"]["salt_data"]
    assert exported["parameters"]["pass_data"] != data["parameters"]["pass_data"]
    assert all(s.pri is None for s in et.services)
    assert [u.user for u in et.users if u.pri is not None] == ["n2"]
    ek = ServiceKeys.from_tree(et)
    assert ek.users["n2"].pair.to_bytes() == keys.users["n2"].pair.to_bytes()  # type: ignore[union-attr]
    cred = credentials(et, "n2")
    assert cred.signer is Signer.USER and cred.svc == "spark"
    with pytest.raises(KeyConfigError, match="no private key"):
        credentials(et, "n1")
    # an exported tree cannot export another node: it has no other private key
    with pytest.raises(KeyConfigError, match='"n1" is not configured with a private key'):
        gen_key.export_user_config(exported, "n1")


def test_export_over_a_file_that_is_not_utf8_replaces_it(master: Path, cwd: Path) -> None:
    (cwd / "A").mkdir()
    (cwd / "A" / "param.yaml").write_bytes(b"\xff\xfe not yaml")
    code, out, err = run("-x", "A", "-s", "test", answer="y\n")
    assert code == 0, err
    assert "update file" in out
    assert tree.load_dir(cwd / "A").users[0].user == "A"


def test_a_password_file_that_cannot_be_read_says_why(master: Path) -> None:
    (master / ".pass").rename(master / "pass.bak")
    (master / ".pass").mkdir()  # there, but not a file it can read (as a file of mode 000 for a user)
    with pytest.raises(KeyConfigError, match=r"password file .*\.pass': Is a directory"):
        ServiceKeys.from_tree(tree.load_dir(master))


def test_a_config_the_system_refuses_is_a_config_error(master: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(self: Path) -> bool:
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "is_file", refused)  # as a directory of mode 000 for a user that is not root
    with pytest.raises(ConfigError, match=r"cannot read the configuration .*config.yaml': Permission denied"):
        tree.load(master)
