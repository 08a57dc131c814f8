"""An agent session with the official Python MCP SDK against `mess mcp` configured with two
exchanges: its own home (`primary`) and a household exchange (`house`, a `mess serve` this
script starts, stops and starts again on the same port). The agent creates requests on both,
waits on both at once, sees answers from both, cancels on the house, and keeps working on its
own exchange while the house is down. Run by tests/it/mcp_python.rs, which passes MESS_BIN,
LAPTOP_HOME (the agent's home), HOUSE_HOME, AGENT_KEY (an agent key of the house) and
ROBOT_KEY (an executor key of the house); exits non-zero on any failure.
"""

import os
import subprocess
import sys
import time

import anyio
from mcp import Client, StdioServerParameters

BIN = os.environ["MESS_BIN"]
LAPTOP = os.environ["LAPTOP_HOME"]
HOUSE = os.environ["HOUSE_HOME"]
AGENT_KEY = os.environ["AGENT_KEY"]
ROBOT_KEY = os.environ["ROBOT_KEY"]


def check(condition: bool, what: str) -> None:
    if not condition:
        raise AssertionError(what)


def text_of(result) -> str:
    return "\n".join(c.text for c in result.content if getattr(c, "text", None))


def start_house(addr: str) -> tuple[subprocess.Popen, int] | None:
    """`mess serve` on the house's home and its port (from the first line it prints), or None
    when it did not start."""
    proc = subprocess.Popen([BIN, "serve", "--addr", addr],
                            env={**os.environ, "MESS_HOME": HOUSE, "MESS_LOG": "warn"},
                            stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline().strip()
    if not line:
        proc.wait(timeout=30)
        return None
    return proc, int(line.rsplit(":", 1)[1])


def mess(*args: str, home: str = LAPTOP, key: str | None = None) -> str:
    """The mess CLI (on the laptop's home, or with --exchange and a key on the house)."""
    env = {**os.environ, "MESS_HOME": home}
    if key:
        env["MESS_API_KEY"] = key
    out = subprocess.run([BIN, *args], env=env, capture_output=True, text=True, timeout=60)
    check(out.returncode == 0, f"mess {' '.join(args)}: {out.stderr}")
    return out.stdout


async def wait_for(client: Client, want, what: str, **args) -> dict:
    """Calls mess_wait until an item `want` accepts comes back (other changes may come first)."""
    for _ in range(10):
        waited = await client.call_tool("mess_wait", {"timeout_s": 20, **args})
        check(not waited.is_error, f"{what}: {text_of(waited)}")
        for item in waited.structured_content["updated"]:
            if want(item):
                return item
    raise AssertionError(f"{what}: never heard")


async def session(client: Client, house_url: str, restart) -> None:
    # A request on each exchange; refs are told apart by `exchange`.
    local = await client.call_tool("mess_do", {"intent": "water the plants", "requires": ["take-photo"]})
    check(not local.is_error, text_of(local))
    local_ref = local.structured_content["MESS"][1]["ack"]["ref"]
    remote = await client.call_tool("mess_do", {"intent": "vacuum the kitchen", "requires": ["vacuum-floor"],
                                                "exchange": "house"})
    check(not remote.is_error, text_of(remote))
    check(remote.structured_content["exchange"] == "house", text_of(remote))
    remote_ref = remote.structured_content["MESS"][1]["ack"]["ref"]

    # Both are listed, each marked; mess://pending says the same.
    listed = await client.call_tool("mess_status", {})
    marks = {(t["ref"], t["exchange"]) for t in listed.structured_content["threads"]}
    check((local_ref, "primary") in marks and (remote_ref, "house") in marks, text_of(listed))
    pending = await client.read_resource("mess://pending")
    body = pending.contents[0].text
    check("exchange: house" in body and "exchange: primary" in body and remote_ref in body, body)

    # One wait on every exchange hears the house's robot claim its request...
    async with anyio.create_task_group() as tg:
        heard = {}

        async def wait_remote():
            heard["item"] = await wait_for(
                client, lambda i: i["ref"] == remote_ref and i["status"] == "claimed", "wait on every exchange")

        tg.start_soon(wait_remote)
        await anyio.sleep(1.0)
        mess("--exchange", house_url, "claim", remote_ref, key=ROBOT_KEY)
    check(heard["item"]["exchange"] == "house", str(heard))

    # ...and a local executor claim its own.
    async with anyio.create_task_group() as tg:
        async def wait_local():
            heard["local"] = await wait_for(
                client, lambda i: i["ref"] == local_ref and i["status"] == "claimed", "wait on every exchange")

        tg.start_soon(wait_local)
        await anyio.sleep(1.0)
        mess("claim", local_ref, "--as", "teague-phone")
    check(heard["local"]["exchange"] == "primary", str(heard))

    # Answers from both: a wait on the house alone hears it complete.
    async with anyio.create_task_group() as tg:
        async def wait_done():
            heard["done"] = await wait_for(
                client, lambda i: i["status"] == "completed", "wait on the house", re=remote_ref, exchange="house")

        tg.start_soon(wait_done)
        await anyio.sleep(1.0)
        mess("--exchange", house_url, "complete", remote_ref, "--text", "kitchen done", key=ROBOT_KEY)
    check(heard["done"]["ref"] == remote_ref and heard["done"]["exchange"] == "house", str(heard))
    mess("complete", local_ref, "--as", "teague-phone", "--text", "plants watered")
    there = await client.call_tool("mess_status", {"re": remote_ref, "exchange": "house"})
    check("kitchen done" in text_of(there), text_of(there))
    here = await client.call_tool("mess_status", {"re": local_ref})
    check("plants watered" in text_of(here), text_of(here))

    # The house goes down: its calls fail naming it, the listing says it is unreachable, and the
    # agent's own exchange keeps working.
    restart(down=True)
    gone = await client.call_tool("mess_do", {"intent": "mop the hall", "exchange": "house"})
    check(gone.is_error and house_url in text_of(gone), text_of(gone))
    listed = await client.call_tool("mess_status", {"re": "all"})
    check(any(u["exchange"] == "house" for u in listed.structured_content.get("unreachable", [])),
          text_of(listed))
    check(any(t["ref"] == local_ref for t in listed.structured_content["threads"]), text_of(listed))
    idle = await client.call_tool("mess_wait", {"timeout_s": 2})
    check(idle.structured_content["timed_out"] and idle.structured_content["unreachable"][0]["exchange"] == "house",
          text_of(idle))
    still = await client.call_tool("mess_observe", {"intent": "is the door locked?", "wait_s": 0})
    check(not still.is_error, text_of(still))

    # Back up on the same address: a request there, cancelled from here.
    restart(down=False)
    again = await client.call_tool("mess_do", {"intent": "water the garden", "exchange": "house"})
    check(not again.is_error, text_of(again))
    again_ref = again.structured_content["MESS"][1]["ack"]["ref"]
    cancelled = await client.call_tool("mess_cancel", {"re": again_ref, "reason": "it rained",
                                                      "exchange": "house"})
    check(not cancelled.is_error, text_of(cancelled))
    status = await client.call_tool("mess_status", {"re": again_ref, "exchange": "house"})
    check(status.structured_content["status"] == "cancelled", text_of(status))
    print("ok: two exchanges")


async def main() -> None:
    house = {}
    house["proc"], port = start_house("127.0.0.1:0")
    url = f"http://127.0.0.1:{port}"

    def restart(down: bool) -> None:
        if down:
            house["proc"].terminate()
            house["proc"].wait(timeout=30)
        else:
            # The port was just freed; another start may briefly find it still held.
            for _ in range(50):
                started = start_house(f"127.0.0.1:{port}")
                if started:
                    house["proc"] = started[0]
                    return
                time.sleep(0.2)
            raise AssertionError("the house did not start again")

    with open(os.path.join(LAPTOP, "config.yaml"), "a") as config:
        config.write(f"exchanges:\n  house:\n    type: remote\n    url: {url}\n    api_key: ${{HOUSE_KEY}}\n")
    params = StdioServerParameters(command=BIN, args=["mcp"],
                                   env={"MESS_HOME": LAPTOP, "MESS_AGENT_ID": "claude-agent",
                                        "HOUSE_KEY": AGENT_KEY, "MESS_MCP_HEARTBEAT_MS": "200"})
    try:
        async with Client(params) as client:
            await session(client, url, restart)
    finally:
        house["proc"].terminate()
        house["proc"].wait(timeout=30)


if __name__ == "__main__":
    try:
        anyio.run(main)
    except Exception as e:  # report the failure in one place for the Rust test
        print(f"FAILED: {type(e).__name__}: {e}", file=sys.stderr)
        raise
