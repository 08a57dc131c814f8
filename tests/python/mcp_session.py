"""A scripted agent session against `mess` with the official Python MCP SDK, over stdio and
streamable HTTP, in both protocol eras (legacy initialize and 2026-07-28): create with
mess_observe and mess_do, an executor answering through the HTTP API, waits, questions
answered with mess_reply, the response read with mess_status, cancel, query, resources and
resource-update notifications. Run by tests/it/mcp_python.rs, which starts `mess serve` and
passes MESS_BIN, MESS_HOME, MESS_PORT, AGENT_KEY and EXECUTOR_KEY; exits non-zero on any failure.
"""

import contextlib
import json
import os
import sys
import urllib.request

import warnings

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

# The legacy-era run uses resources/subscribe on purpose.
warnings.filterwarnings("ignore", message="resources/subscribe")

BIN = os.environ["MESS_BIN"]
HOME = os.environ["MESS_HOME"]
PORT = os.environ["MESS_PORT"]
AGENT_KEY = os.environ["AGENT_KEY"]
EXECUTOR_KEY = os.environ["EXECUTOR_KEY"]


def executor_sends(yaml: str) -> dict:
    """The executor (roomba-kitchen) posts a MESS message through the HTTP API."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{PORT}/mess",
        data=yaml.encode(),
        method="POST",
        headers={
            "Authorization": f"Bearer {EXECUTOR_KEY}",
            "Content-Type": "application/yaml",
            "Accept": "application/json",
        },
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def text_of(result) -> str:
    return "\n".join(c.text for c in result.content if getattr(c, "text", None))


def check(condition: bool, what: str) -> None:
    if not condition:
        raise AssertionError(what)


async def session(client: Client, label: str, legacy_updates: list) -> None:
    tools = (await client.list_tools()).tools
    names = {t.name for t in tools}
    for want in ["mess", "mess_observe", "mess_do", "mess_status", "mess_wait", "mess_reply",
                 "mess_cancel", "mess_query", "mess_capabilities", "mess_fetch"]:
        check(want in names, f"{label}: tool {want} missing from {sorted(names)}")
    # Every tool with structured content declares its shape (mess_fetch answers in text only);
    # the SDK checks each structured result of this session against it.
    for t in tools:
        declared = t.output_schema is not None and t.output_schema.get("type") == "object"
        check(declared == (t.name != "mess_fetch"), f"{label}: {t.name} output schema: {t.output_schema}")

    done = await client.call_tool("mess_do", {"intent": f"vacuum the kitchen ({label})",
                                              "requires": ["vacuum-floor"]})
    check(not done.is_error, f"{label}: mess_do failed: {text_of(done)}")
    ref = done.structured_content["MESS"][1]["ack"]["ref"]
    uri = f"mess://request/{ref}"
    if legacy_updates is not None:
        await client.subscribe_resource(uri)

    # The executor claims through HTTP; the wait wakes.
    async def claim_soon():
        await anyio.sleep(0.3)
        await anyio.to_thread.run_sync(
            executor_sends, f"MESS:\n  - status:\n      re: {ref}\n      code: claimed\n")

    async with anyio.create_task_group() as tg:
        tg.start_soon(claim_soon)
        seen = []

        async def on_progress(progress, total, message):
            seen.append(progress)

        waited = await client.call_tool("mess_wait", {"re": ref, "timeout_s": 20},
                                        progress_callback=on_progress)
    check(not waited.structured_content["timed_out"], f"{label}: wait timed out: {text_of(waited)}")
    check(waited.structured_content["updated"][0]["status"] == "claimed", f"{label}: {text_of(waited)}")

    executor_sends(f"MESS:\n  - status:\n      re: {ref}\n      code: needs_input\n      questions:\n"
                   f"        - field: where\n          question: Which spill?\n          options: [sink, stove]\n")
    status = await client.call_tool("mess_status", {"re": ref})
    check("Which spill?" in text_of(status), f"{label}: question not shown: {text_of(status)}")
    replied = await client.call_tool("mess_reply", {"ref": ref, "answers": {"where": "sink"}})
    check(not replied.is_error, f"{label}: mess_reply failed: {text_of(replied)}")
    executor_sends(f"MESS:\n  - status:\n      re: {ref}\n      code: completed\n  - response:\n"
                   f"      re: {ref}\n      content:\n        - the sink side is clean\n")
    status = await client.call_tool("mess_status", {"re": ref})
    check("the sink side is clean" in text_of(status), f"{label}: response not shown: {text_of(status)}")
    if label.startswith("stdio"):
        # Nothing changes on a finished request: the wait times out after 1 s, with progress
        # heartbeats meanwhile (this server sends one every 200 ms).
        beats = []

        async def count(progress, total, message):
            beats.append(progress)

        idle = await client.call_tool("mess_wait", {"re": ref, "timeout_s": 1}, progress_callback=count)
        check(idle.structured_content["timed_out"] is True, f"{label}: idle wait: {text_of(idle)}")
        check(len(beats) >= 2, f"{label}: heartbeats during a 1 s wait: {beats}")

    seen_obs = await client.call_tool("mess_observe", {"intent": f"is the door locked? ({label})", "wait_s": 0})
    check(not seen_obs.is_error, f"{label}: mess_observe failed")
    cancelled = await client.call_tool("mess_cancel", {"re": "last", "reason": "checked myself"})
    check(not cancelled.is_error, f"{label}: mess_cancel failed: {text_of(cancelled)}")

    query = await client.call_tool("mess_query", {"sql": f"SELECT status FROM threads WHERE ref = '{ref}'",
                                                  "format": "json"})
    check(not query.is_error and query.structured_content["rows"] == [{"status": "completed"}],
          f"{label}: query: {text_of(query)}")
    caps = await client.call_tool("mess_capabilities", {})
    check(any(c["id"] == "vacuum-floor" for c in caps.structured_content["capabilities"]),
          f"{label}: capabilities: {text_of(caps)}")
    mine = await client.call_tool("mess_status", {})
    check(isinstance(mine.structured_content["threads"], list), f"{label}: open threads: {text_of(mine)}")
    raw = await client.call_tool("mess", {"message": "MESS:\n  - request:\n      intent: water the plants\n"})
    check("ack" in raw.structured_content["MESS"][1], f"{label}: raw message: {text_of(raw)}")
    refused = await client.call_tool("mess_query", {"sql": "COPY threads TO '/tmp/x.csv'"})
    check(refused.is_error, f"{label}: a writing query was not refused")
    bad = await client.call_tool("mess_do", {"intent": "x", "priority": "asap"})
    check(bad.is_error and "priority" in text_of(bad), f"{label}: bad priority: {text_of(bad)}")

    resources = {r.uri for r in (await client.list_resources()).resources}
    check({"mess://pending", "mess://history", "mess://help"} <= resources, f"{label}: {resources}")
    page = await client.read_resource(uri)
    check("completed" in page.contents[0].text, f"{label}: {uri}: {page.contents[0].text}")
    help_text = await client.read_resource("mess://help")
    check(help_text.contents[0].text.startswith("# MESS"), f"{label}: help")

    if legacy_updates is not None:
        for _ in range(50):
            if any(u == uri for u in legacy_updates):
                break
            await anyio.sleep(0.1)
        check(uri in legacy_updates, f"{label}: no resources/updated for {uri}: {legacy_updates}")


async def run(make_client, label: str, legacy: bool) -> None:
    updates = [] if legacy else None

    async def handler(message):
        params = getattr(getattr(message, "root", message), "params", None)
        uri = getattr(params, "uri", None)
        if uri is not None and updates is not None:
            updates.append(str(uri))

    async with make_client(handler) as client:
        await session(client, label, updates)
        if not legacy:
            # 2026-07-28: subscriptions/listen streams the update of a watched request.
            obs = await client.call_tool("mess_observe", {"intent": f"photo of the porch ({label})", "wait_s": 0})
            ref = obs.structured_content["MESS"][1]["ack"]["ref"]
            uri = f"mess://request/{ref}"
            async with client.listen(resource_subscriptions=[uri]) as sub:
                executor_sends(f"MESS:\n  - status:\n      re: {ref}\n      code: claimed\n")
                with anyio.fail_after(10):
                    async for event in sub:
                        if uri in str(event):
                            break
    print(f"ok: {label}")


def stdio(mode):
    params = StdioServerParameters(command=BIN, args=["mcp"],
                                   env={"MESS_HOME": HOME, "MESS_AGENT_ID": "claude-agent",
                                        "MESS_MCP_HEARTBEAT_MS": "200"})
    return lambda handler: Client(params, mode=mode, message_handler=handler)


def http(mode):
    @contextlib.asynccontextmanager
    async def make(handler):
        http_client = create_mcp_http_client(headers={"Authorization": f"Bearer {AGENT_KEY}"})
        transport = streamable_http_client(f"http://127.0.0.1:{PORT}/mcp", http_client=http_client)
        async with http_client, Client(transport, mode=mode, message_handler=handler) as client:
            yield client
    return make


async def main() -> None:
    await run(stdio("legacy"), "stdio legacy", legacy=True)
    await run(stdio("auto"), "stdio auto", legacy=False)
    await run(http("legacy"), "http legacy", legacy=True)
    await run(http("auto"), "http auto", legacy=False)


if __name__ == "__main__":
    try:
        anyio.run(main)
    except Exception as e:  # report the failure in one place for the Rust test
        print(f"FAILED: {type(e).__name__}: {e}", file=sys.stderr)
        raise
