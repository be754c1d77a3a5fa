"""Drives headless Chromium through the DevTools protocol on a pipe (--remote-debugging-pipe:
commands on fd 3, replies on fd 4, each a JSON message ended by a NUL byte), as a person would:
open URL, wait until the page shows WANT, press Ctrl-F, type QUERY, wait until the page shows
FOUND and no longer shows GONE. Prints what the page showed at each step as JSON.

usage: cdp_driver.py CHROMIUM USER_DATA_DIR URL WANT QUERY FOUND GONE
"""
import json
import os
import subprocess
import sys
import time

chromium, user_data, url, want, query, found, gone = sys.argv[1:8]

to_chrome_r, to_chrome_w = os.pipe()
from_chrome_r, from_chrome_w = os.pipe()


def fds_3_and_4():
    os.dup2(to_chrome_r, 3)
    os.dup2(from_chrome_w, 4)


browser = subprocess.Popen(
    [
        chromium,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--remote-debugging-pipe",
        "--user-data-dir=" + user_data,
        "--window-size=1200,800",
        "about:blank",
    ],
    pass_fds=(3, 4),
    preexec_fn=fds_3_and_4,
    stdout=subprocess.DEVNULL,
    stderr=subprocess.DEVNULL,
)
os.close(to_chrome_r)
os.close(from_chrome_w)
pending = b""
next_id = 0


def read_message():
    global pending
    while b"\0" not in pending:
        chunk = os.read(from_chrome_r, 1 << 16)
        if not chunk:
            raise SystemExit("chromium closed the DevTools pipe")
        pending += chunk
    message, pending = pending.split(b"\0", 1)
    return json.loads(message)


def send(method, params=None, session=None):
    global next_id
    next_id += 1
    message = {"id": next_id, "method": method, "params": params or {}}
    if session:
        message["sessionId"] = session
    os.write(to_chrome_w, json.dumps(message).encode() + b"\0")
    while True:
        reply = read_message()
        if reply.get("id") == next_id:
            if "error" in reply:
                raise SystemExit(f"{method}: {reply['error']}")
            return reply.get("result", {})


def evaluate(session, expression):
    result = send(
        "Runtime.evaluate",
        {"expression": expression, "returnByValue": True},
        session,
    )
    return result.get("result", {}).get("value")


def wait_for(session, expression, done, what, timeout=60):
    """Evaluates EXPRESSION until DONE(value) holds (the page's own time, not a fixed wait)."""
    deadline = time.monotonic() + timeout
    value = None
    while time.monotonic() < deadline:
        value = evaluate(session, expression)
        if done(value):
            return value
        time.sleep(0.05)
    raise SystemExit(f"timed out waiting for {what}; the page shows: {value!r}")


try:
    target = send("Target.createTarget", {"url": url})["targetId"]
    session = send("Target.attachToTarget", {"targetId": target, "flatten": True})[
        "sessionId"
    ]
    page = "document.body ? document.body.innerText : ''"
    loaded = wait_for(session, page, lambda t: t and want in t, f"{want!r} on the page")
    # The page keeps the keyboard focus even when the browser's window has none.
    send("Emulation.setFocusEmulationEnabled", {"enabled": True}, session)
    key = {
        "modifiers": 2,
        "key": "f",
        "code": "KeyF",
        "windowsVirtualKeyCode": 70,
        "nativeVirtualKeyCode": 70,
    }
    focused = "document.activeElement ? document.activeElement.tagName : ''"
    # A person presses Ctrl-F again when the first press went unseen (on a loaded machine the
    # page may not listen yet when its text is already drawn); each press gets 3 s.
    deadline = time.monotonic() + 60
    while True:
        send("Input.dispatchKeyEvent", dict(key, type="keyDown"), session)
        send("Input.dispatchKeyEvent", dict(key, type="keyUp"), session)
        try:
            wait_for(
                session,
                focused,
                lambda tag: tag == "INPUT",
                "the search box to take the focus",
                timeout=3,
            )
            break
        except SystemExit:
            if time.monotonic() > deadline:
                raise
    send("Input.insertText", {"text": query}, session)
    searched = wait_for(
        session,
        page,
        lambda t: t and found in t and gone not in t,
        f"the search for {query!r} to show {found!r} without {gone!r}",
    )
    print(json.dumps({"loaded": loaded, "searched": searched}))
finally:
    browser.kill()
    browser.wait()
