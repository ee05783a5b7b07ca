"""Surface variation of user messages: politeness, chatter, casing, typos; no-tool exchanges."""

from __future__ import annotations

import random

from .concepts import lines

PREFIXES = lines(
    "hi,|hello!|hey -|good morning.|please|could you|can you please|quick one:|"
    "hi team,|urgent:|sorry to bother you, but|yo|dear support,|hello there,|"
    "I need help.|hey, so|excuse me,|help!|ok so|greetings,|morning!|thanks in advance -"
)
SUFFIXES = lines(
    "thanks!|thank you|thx|asap please|cheers|appreciate it|ty|as soon as possible|"
    "when you get a chance|please and thank you|:)|it's kind of urgent|many thanks|"
    "if possible|right away|thanks a lot|no rush|quickly please|much appreciated|ok?"
)
# Joiners for parallel requests (kept verbatim: the spaces matter).
CONNECTORS = (
    " and also ",
    " and ",
    " - also, ",
    " plus ",
    ", then ",
    "; and ",
    " as well as ",
    " and then ",
    ". Also: ",
    ", and ",
    " & ",
    ". ",
)
# More joiners, for training only (``Augmentation.more_connectors``): a list apart, so
# that the held-out third of CONNECTORS (and the held-out set) stays as it is.
MORE_CONNECTORS = (
    " also ",
    "! ",
    "? ",
    "\n",
    "; ",
    ", also ",
    " oh and ",
    ", after that ",
    " and after that ",
    " too, ",
    " - and ",
    ", besides that ",
)
INSTRUCTIONS = lines(
    "You are a helpful customer support agent.|You are an IT operations assistant.|"
    "Answer briefly and use the tools when needed.|You help customers with orders and billing.|"
    "You are the ops bot of the infrastructure team.|Be concise.|"
    "You are a support agent for an online shop. Use the tools to answer.|"
    "You are an assistant that can call tools.|Keep answers short and friendly.|"
    "You manage servers and services for the platform team.|Help the user with their request.|"
    "You are a friendly assistant.|"
    "You are the support agent of a web shop. Use the tools to look up orders, shipments and "
    "invoices and to change accounts; never make data up. Reply briefly once you know the answer.|"
    "You are the on-call assistant of the infrastructure team. Check hosts and services with the "
    "tools before acting, and report what you did in one sentence.|"
    "You help users of our platform. Call a tool when the request needs data or an action; "
    "otherwise answer directly and politely."
)
# (request, reply) pairs for turns that need no tool.
NO_TOOL = (
    ("hi", "Hello! How can I help you today?"),
    ("hello", "Hi! What can I do for you?"),
    ("thanks, that's all", "You're welcome! Have a great day."),
    ("what can you do?", "I can look things up and take actions with my tools. What do you need?"),
    ("tell me a joke", "Sorry, I can only help with requests my tools support."),
    ("who are you?", "I'm an assistant that uses tools to help with your requests."),
    ("good morning", "Good morning! How can I help?"),
    ("thank you so much", "Happy to help!"),
    ("can you help me?", "Of course. What do you need?"),
    ("ok great", "Glad that helped. Anything else?"),
    ("what's the meaning of life", "Sorry, I can only help with requests my tools support."),
    ("bye", "Goodbye!"),
    ("are you a bot?", "Yes, I'm an automated assistant. How can I help?"),
    ("hmm never mind", "No problem. Let me know if you need anything."),
    ("write me a poem about cats", "Sorry, I can only help with requests my tools support."),
    ("how are you?", "I'm doing well, thanks! What can I do for you?"),
    ("nothing else, thanks", "You're welcome! Have a great day."),
    ("that's perfect, thank you", "Happy to help!"),
    ("what is your name", "I'm an assistant that uses tools to help with your requests."),
    ("can you order me a pizza", "Sorry, I can only help with requests my tools support."),
)
# Tool failures as the runtime reports them ("{Type}: {message}"); {tool} and {n} are filled in.
ERROR_RESULTS = lines(
    "TimeoutError: tool '{tool}' did not finish within {n}s|KeyError: not found|"
    "PermissionError: permission denied|ValueError: invalid id|ConnectionError: service unavailable|"
    "RuntimeError: rate limited|LookupError: no such record|not found|timeout"
)
# Chained support requests: a refund without an amount needs the order looked up first.
CHAIN_REFUND = lines(
    "I want a refund for order {order}, it {reason}|please refund order {order} - it {reason}|"
    "refund my order {order} in full, reason: {reason}|order {order} {reason}, I want my money back|"
    "can I get my money back for {order}? it {reason}|full refund on {order} please, {reason}|"
    "my order {order} {reason}. refund it|refund everything on order {order} because it {reason}"
)
ERROR_FINALS = lines(
    "Sorry, that failed: {error}.|I couldn't do that: {error}.|The request failed ({error}).|"
    "Something went wrong: {error}."
)


def add_typo(text: str, rng: random.Random) -> str:
    """Swap two adjacent inner letters of one longer word."""
    tokens = text.split(" ")
    candidates = [i for i, w in enumerate(tokens) if len(w) >= 4 and w.isalpha()]
    if not candidates:
        return text
    i = rng.choice(candidates)
    w = tokens[i]
    j = rng.randint(1, len(w) - 3)
    tokens[i] = w[:j] + w[j + 1] + w[j] + w[j + 2 :]
    return " ".join(tokens)


def vary_literal(text: str, rng: random.Random, casing: str, typo: bool) -> str:
    """Apply a message-wide casing style and maybe a typo to literal (non-argument) text."""
    if typo:
        text = add_typo(text, rng)
    if casing == "lower":
        return text.lower()
    if casing == "upper":
        return text.upper()
    return text
