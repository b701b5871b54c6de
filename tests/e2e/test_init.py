"""``nightowl init`` as a user meets it: typed into a terminal (a pty), against the fake
Telegram and a fake local model server, ending with a paired owner and a config that
``nightowl doctor`` accepts."""

from __future__ import annotations

import asyncio
import signal
import socket
import stat
from pathlib import Path

import yaml

from agent.urls import shown_url
from tests.child_process import Chat, Spawn, clean_env, nightowl
from tests.fakes.llm_server import FakeLLM
from tests.fakes.local_servers import FakeLlamaCpp, FakeOllama
from tests.fakes.telegram_server import FakeTelegram
from tests.waiting import CEILING

OWNER = 4242


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


async def owner_starts(telegram: FakeTelegram, chat: Chat) -> str:
    """What init printed up to its link; the owner opens the link: ``/start CODE``."""
    shown = await chat.out.expect("?start=")
    code = (await chat.out.expect(" ")).strip()
    assert "https://t.me/NightowlBot" in shown
    await chat.out.expect("Ctrl-C skips")
    telegram.push_text(OWNER, "hello")  # not the code: let go, init still waits
    telegram.push_text(
        OWNER, f"/start {code}", user={"id": OWNER, "is_bot": False, "first_name": "Olga"}
    )
    return code


async def test_init_in_a_terminal_pairs_the_owner_and_doctor_accepts_the_config(
    tmp_path: Path, spawn: Spawn
) -> None:
    data = tmp_path / "owl"
    async with FakeTelegram() as telegram, FakeLlamaCpp(served=8_192, declared=32_768) as llama:
        chat = await spawn(
            "init",
            "--data-dir",
            str(data),
            "--telegram-base-url",
            telegram.base_url,
            cwd=tmp_path,
            terminal=True,
        )
        await chat.out.expect("Platforms:")
        await chat.say("telegram")
        await chat.out.expect("Telegram bot token")
        await chat.say("123456:WRONG")
        refused = await chat.out.expect("Telegram bot token")
        assert "✗ the bot token was refused" in refused
        assert "Try again" in refused
        assert "WRONG" not in refused  # typed with the echo off
        await chat.say(telegram.token)
        await chat.out.expect("✓ bot @NightowlBot")
        await chat.out.expect("Model:")
        await chat.say(f"127.0.0.1:{llama.port}")  # no scheme, no /v1: both added
        checked = await chat.out.expect("Pair yourself as the owner on telegram now?")
        assert "It serves qwen3:8b" in checked
        assert "answered a 1-token request" in checked
        assert "llama.cpp serves qwen3:8b with 8,192 tokens" in checked
        assert (data / "config.yaml").is_file()  # written before the wait
        await chat.say("")  # yes
        await owner_starts(telegram, chat)
        await chat.out.expect(f"✓ Paired telegram user {OWNER} (Olga)")
        assert await chat.wait() == 0, chat.err.text
        assert "nightowl doctor -c" in chat.out.text
        # Only the owner is allowed: a group of theirs would get silence, so init says how.
        assert (
            "It answers in private chats; for groups, add them to "
            "platforms.telegram.allowed_chats (a group's id)." in chat.out.text
        )
        welcome = [m for m in telegram.sent if m.chat_id == OWNER]
        assert len(welcome) == 1 and "owner" in welcome[0].text

        config_text = (data / "config.yaml").read_text()
        env_text = (data / ".env").read_text()
        assert telegram.token not in config_text
        assert f"TELEGRAM_BOT_TOKEN={telegram.token}" in env_text.splitlines()
        config = yaml.safe_load(config_text)
        assert config["platforms"]["telegram"]["token"] == "${TELEGRAM_BOT_TOKEN}"
        assert config["platforms"]["telegram"]["allowed_users"] == [str(OWNER)]
        assert config["model"] == {
            "provider": "openai",
            "name": "qwen3:8b",
            "base_url": f"http://127.0.0.1:{llama.port}/v1",
        }
        assert (mode(data), mode(data / "config.yaml"), mode(data / ".env")) == (
            0o700,
            0o600,
            0o600,
        )

        code, out, err = await nightowl("doctor", "-c", str(data / "config.yaml"), cwd=tmp_path)
        assert code == 0, out + err
        assert f"✓ telegram: bot @NightowlBot (id {telegram.bot_user['id']})" in out


async def test_no_message_in_time_leaves_the_owner_unpaired_and_ctrl_c_skips(
    tmp_path: Path, spawn: Spawn
) -> None:
    data = tmp_path / "owl"
    async with FakeTelegram() as telegram, FakeLlamaCpp(served=4_096) as llama:
        chat = await spawn(
            "init",
            "--data-dir",
            str(data),
            "--telegram-base-url",
            telegram.base_url,
            cwd=tmp_path,
            terminal=True,
        )
        for prompt, answer in (
            ("Platforms:", "telegram,console"),
            ("bot token", telegram.token),
            ("Model:", f"http://127.0.0.1:{llama.port}/v1"),
            ("owner on telegram now?", "y"),
        ):
            await chat.out.expect(prompt)
            await chat.say(answer)
        await chat.out.expect("Ctrl-C skips")
        chat.signal(signal.SIGINT)
        await chat.out.expect("Not paired")
        assert await chat.wait() == 0, chat.err.text
    config = yaml.safe_load((data / "config.yaml").read_text())
    assert config["platforms"]["telegram"]["allowed_users"] == []
    assert config["platforms"]["console"] == {"enabled": True}


async def test_an_existing_config_is_not_overwritten_without_asking(
    tmp_path: Path, spawn: Spawn
) -> None:
    data = tmp_path / "owl"
    data.mkdir()
    (data / "config.yaml").write_text("model: {name: mine}\n")
    chat = await spawn("init", "--data-dir", str(data), cwd=tmp_path, terminal=True)
    await chat.out.expect("exists. Overwrite it? [y/N]")
    await chat.say("")
    await chat.out.expect("Left as it is.")
    assert await chat.wait() == 0
    assert (data / "config.yaml").read_text() == "model: {name: mine}\n"

    code, _, err = await nightowl(
        "init",
        "--non-interactive",
        "--data-dir",
        str(data),
        "--model-url",
        "http://x",
        cwd=tmp_path,
    )
    assert code == 2
    assert "exists: pass --force to overwrite it" in err
    assert (data / "config.yaml").read_text() == "model: {name: mine}\n"


def scripted(data: Path, telegram: FakeTelegram, llama: FakeLlamaCpp) -> list[str]:
    """``init --non-interactive`` for Telegram and the local server, less the token."""
    flags = ["--non-interactive", "--data-dir", str(data), "--platform", "telegram"]
    return flags + [
        "--telegram-base-url",
        telegram.base_url,
        "--model-url",
        f"127.0.0.1:{llama.port}",
    ]


async def test_non_interactive_writes_the_same_files(tmp_path: Path) -> None:
    data = tmp_path / "owl"
    async with FakeTelegram() as telegram, FakeLlamaCpp(served=8_192) as llama:
        flags = scripted(data, telegram, llama)
        code, out, err = await nightowl("init", *flags, "--telegram-token", "1:bad", cwd=tmp_path)
        assert code == 1 and "the bot token was refused" in out
        # Said by what was given, not by a config key init has not written.
        assert "— check --telegram-token or $TELEGRAM_BOT_TOKEN (from @BotFather)" in out
        assert "nothing written" in err and not data.exists()

        code, out, err = await nightowl(
            "init", *flags, "--telegram-token", telegram.token, cwd=tmp_path
        )
        assert code == 0, out + err
        assert "llama.cpp serves qwen3:8b with 8,192 tokens" in out
        config = yaml.safe_load((data / "config.yaml").read_text())
        assert config["platforms"]["telegram"] == {
            "enabled": True,
            "token": "${TELEGRAM_BOT_TOKEN}",
            "base_url": telegram.base_url,
            "allowed_users": [],
        }
        assert config["model"]["base_url"] == f"http://127.0.0.1:{llama.port}/v1"
        assert f"TELEGRAM_BOT_TOKEN={telegram.token}" in (data / ".env").read_text()
        assert (mode(data), mode(data / "config.yaml"), mode(data / ".env")) == (
            0o700,
            0o600,
            0o600,
        )
        code, out, err = await nightowl("doctor", "-c", str(data / "config.yaml"), cwd=tmp_path)
        assert code == 0, out + err

        code, out, err = await nightowl(
            "init", *flags, "--telegram-token", telegram.token, "--force", cwd=tmp_path
        )
        assert code == 0, out + err


async def test_a_script_s_model_server_that_is_not_there_is_one_line_with_what_to_check(
    tmp_path: Path,
) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    code, _, err = await nightowl(
        "init", "--non-interactive", "--data-dir", str(tmp_path / "owl"),
        "--model-url", f"127.0.0.1:{port}", cwd=tmp_path,
    )  # fmt: skip
    assert code == 1 and not (tmp_path / "owl").exists()
    assert f"http://127.0.0.1:{port}/v1: cannot connect (" in err
    assert err.rstrip().endswith("; check that the server runs there.")


async def test_a_script_is_told_its_flags_and_can_write_before_the_machine_is_online(
    tmp_path: Path,
) -> None:
    """The hint names what the script passed (--model), not a config key it never
    wrote; --no-check writes without the network (doctor tries it later)."""
    data = tmp_path / "owl"
    async with FakeOllama(model="qwen3:8b") as ollama:
        flags = ["init", "--non-interactive", "--data-dir", str(data)]
        flags += ["--model-url", ollama.openai_base_url]
        code, out, err = await nightowl(*flags, "--model", "qwen3:8B", cwd=tmp_path)
        assert code == 1 and not data.exists() and "nothing written" in err
        assert "does not list the model qwen3:8B — set --model to one it serves" in out
        assert "model.name" not in out
    with socket.socket() as probe:  # offline: nothing listens there any more
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    offline = ["init", "--non-interactive", "--data-dir", str(data), "--no-check"]
    offline += ["--model-url", f"127.0.0.1:{port}"]
    code, _, err = await nightowl(*offline, cwd=tmp_path)
    assert code == 2 and "--no-check needs --model" in err and not data.exists()
    code, out, err = await nightowl(*offline, "--model", "qwen3:8b", cwd=tmp_path)
    assert code == 0, out + err
    assert "not checked (--no-check): run `nightowl doctor` once the machine is online" in out
    written = (data / "config.yaml").read_text()
    config = yaml.safe_load(written)
    assert config["model"]["name"] == "qwen3:8b"
    assert config["model"]["base_url"] == f"http://127.0.0.1:{port}/v1"
    # No secret, no .env: the header does not point at one.
    assert "Nothing here needs a\n# secret" in written and not (data / ".env").exists()


async def test_a_script_gives_the_token_in_the_environment_and_names_the_owner(
    tmp_path: Path,
) -> None:
    """No token on the command line (``ps`` shows it to every user of the machine) and
    no pairing to wait for: ``$TELEGRAM_BOT_TOKEN`` and ``--owner telegram:<id>``."""
    data = tmp_path / "owl"
    async with FakeTelegram() as telegram, FakeLlamaCpp(served=8_192) as llama:
        flags = scripted(data, telegram, llama)
        code, _, err = await nightowl("init", *flags, cwd=tmp_path, env=clean_env())
        assert code == 2 and "set TELEGRAM_BOT_TOKEN in the environment" in err
        code, _, err = await nightowl(
            "init", *flags, "--owner", "discord:1", cwd=tmp_path, env=clean_env()
        )
        assert code == 2 and "discord is not among the platforms" in err
        code, _, err = await nightowl(
            "init", *flags, "--owner", "telegram:@olga", cwd=tmp_path, env=clean_env()
        )
        assert code == 2 and "a telegram user id is a number" in err
        assert not data.exists()

        env = clean_env(TELEGRAM_BOT_TOKEN=telegram.token)
        owner = ["--owner", f"telegram:{OWNER}"]
        code, out, err = await nightowl("init", *flags, *owner, cwd=tmp_path, env=env)
        assert code == 0, out + err
    config = yaml.safe_load((data / "config.yaml").read_text())
    assert config["platforms"]["telegram"]["allowed_users"] == [str(OWNER)]
    assert config["platforms"]["telegram"]["token"] == "${TELEGRAM_BOT_TOKEN}"
    assert f"TELEGRAM_BOT_TOKEN={telegram.token}" in (data / ".env").read_text()


async def test_an_api_key_is_checked_and_kept_only_in_the_env_file(
    tmp_path: Path, spawn: Spawn
) -> None:
    data = tmp_path / "owl"
    async with FakeLLM(api_key="sk-right", models=("gpt-4o-mini", "gpt-4o")) as llm:
        env = clean_env(OPENAI_BASE_URL=llm.openai_base_url)  # the SDK's own variable
        chat = await spawn("init", "--data-dir", str(data), cwd=tmp_path, terminal=True, env=env)
        await chat.out.expect("Platforms:")
        await chat.say("")
        await chat.out.expect("Model:")
        await chat.say("openai")
        await chat.out.expect("API key")
        await chat.say("sk-wrong")  # the listing itself refuses it, as OpenAI's does
        refused = await chat.out.expect("Model:")
        assert "✗" in refused and "401" in refused
        await chat.say("OpenAI")
        await chat.out.expect("OpenAI API key (stored in .env as OPENAI_API_KEY):")
        await chat.say("sk-right")
        await chat.out.expect("Model name (gpt-4o-mini, gpt-4o) [gpt-4o-mini]:")
        await chat.say("")
        assert await asyncio.wait_for(chat.wait(), CEILING) == 0, chat.out.text
        # Where the SDK's variable sent it, not OpenAI's API, which nobody asked.
        assert f"gpt-4o-mini at {shown_url(llm.openai_base_url)} answered" in chat.out.text
    config_text = (data / "config.yaml").read_text()
    assert "sk-right" not in config_text
    assert yaml.safe_load(config_text)["model"]["api_key"] == "${OPENAI_API_KEY}"
    assert "OPENAI_API_KEY=sk-right" in (data / ".env").read_text().splitlines()


async def test_run_refused_in_a_terminal_leaves_no_empty_chat_log(
    tmp_path: Path, spawn: Spawn
) -> None:
    """A terminal's chat logs to <data_dir>/chat.log, made at its first line: a run
    refused at once (no key) leaves nothing behind."""
    chat = await spawn("run", cwd=tmp_path, terminal=True, env=clean_env(HOME=str(tmp_path)))
    assert await asyncio.wait_for(chat.wait(), CEILING) == 2
    assert "No LLM key configured" in chat.out.text + chat.err.text
    assert not (tmp_path / ".nightowl" / "chat.log").exists()


async def test_run_without_a_config_points_to_init_then_chats_as_before(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    home = clean_env(HOME=str(tmp_path))  # no ./config.yaml, no ~/.nightowl/config.yaml
    code, _, err = await nightowl("run", cwd=tmp_path, env=home)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, err  # one sentence, init named in it
    assert lines[0].startswith("nightowl: No LLM key configured: set OPENAI_API_KEY")
    assert "or run `nightowl init`, which writes a config" in lines[0]

    # With a model (the SDK's own variable), the console chat starts on the defaults.
    served = home | {"OPENAI_BASE_URL": fake_llm.openai_base_url}
    code, out, err = await nightowl("run", stdin="hello owl\n", cwd=tmp_path, env=served)
    assert code == 0, err
    assert "`nightowl init` sets one up" in err
    assert "echo: hello owl" in out
    assert (tmp_path / ".nightowl" / "state.db").is_file()


async def test_a_script_answers_the_questions_through_a_pipe(tmp_path: Path) -> None:
    data = tmp_path / "owl"
    async with FakeLlamaCpp(served=4_096) as llama:
        answers = f"\n127.0.0.1:{llama.port}\n"  # the console only; the local server
        code, out, err = await nightowl(
            "init", "--data-dir", str(data), stdin=answers, cwd=tmp_path
        )
        assert code == 0, out + err
        assert "llama.cpp serves qwen3:8b with 4,096 tokens" in out
        config = yaml.safe_load((data / "config.yaml").read_text())
        assert "platforms" not in config  # the console runs when nothing else does
        assert not (data / ".env").exists()  # no secret to keep

        # The answers end before the questions do: said, and nothing more written.
        code, out, err = await nightowl(
            "init", "--data-dir", str(tmp_path / "other"), stdin="telegram\n", cwd=tmp_path
        )
        assert code == 1 and "the answers ended first" in err
        assert not (tmp_path / "other").exists()


async def test_an_owner_named_on_the_command_line_is_not_asked_to_pair(tmp_path: Path) -> None:
    data = tmp_path / "owl"
    async with FakeTelegram() as telegram, FakeLlamaCpp(served=4_096) as llama:
        answers = f"telegram\n{telegram.token}\n127.0.0.1:{llama.port}\n"
        code, out, err = await nightowl(
            "init",
            "--data-dir",
            str(data),
            "--telegram-base-url",
            telegram.base_url,
            "--owner",
            f"telegram:{OWNER}",
            stdin=answers,
            cwd=tmp_path,
        )
    assert code == 0, out + err
    assert f"telegram: {OWNER} in allowed_users." in out
    assert "Pair yourself" not in out
    config = yaml.safe_load((data / "config.yaml").read_text())
    assert config["platforms"]["telegram"]["allowed_users"] == [str(OWNER)]
