"""IT-operations concepts (hosts, services, disks, deployments, incidents, access) and general requests."""

from __future__ import annotations

import random
from typing import Any

from . import slots
from .concepts import Concept, Param, lines, words

_HOST = Param(
    "host",
    words("host hostname server machine node target"),
    "string",
    slots.host,
    descs=lines("Host name|The server|Which machine"),
)
_SERVICE = Param(
    "service",
    words("service service_name unit name app"),
    "string",
    slots.service,
    descs=lines("Service name|The systemd unit|Which service"),
)
_USER = Param(
    "user",
    words("username user login account user_name"),
    "string",
    slots.username,
    descs=lines("The username|Login name"),
)
_ENVS = ("production", "staging", "dev", "qa")


def _restart(rng: random.Random, a: dict[str, Any]) -> dict[str, Any]:
    return {
        "host": a["host"],
        "service": a["service"],
        "status": "active",
        "pid": rng.randint(300, 65000),
    }


def _disk(rng: random.Random, a: dict[str, Any]) -> dict[str, Any]:
    return {
        "host": a["host"],
        "used_percent": rng.randint(12, 99),
        "free_gb": rng.randint(1, 900),
        "mount": a.get("path", "/"),
    }


def _status(rng: random.Random, a: dict[str, Any]) -> dict[str, Any]:
    return {
        "host": a["host"],
        "service": a["service"],
        "state": rng.choice(("running", "stopped", "failed", "degraded")),
        "uptime_h": rng.randint(0, 2000),
    }


def _deploy(rng: random.Random, a: dict[str, Any]) -> dict[str, Any]:
    return {
        "service": a["service"],
        "version": a["version"],
        "environment": a["env"],
        "deploy_id": f"D-{rng.randint(100, 9999)}",
        "status": rng.choice(("succeeded", "in progress", "queued")),
    }


def _logs(rng: random.Random, a: dict[str, Any]) -> dict[str, Any]:
    return {
        "host": a["host"],
        "service": a["service"],
        "errors": rng.randint(0, 40),
        "last_error": rng.choice(("connection refused", "timeout", "out of memory", "none")),
    }


def _incident(rng: random.Random, a: dict[str, Any]) -> dict[str, Any]:
    return {"incident_id": f"INC-{rng.randint(100, 9999)}", "state": "open"}


def _grant(rng: random.Random, a: dict[str, Any]) -> dict[str, Any]:
    return {"user": a["user"], "role": a["role"], "granted": True}


def _disable(rng: random.Random, a: dict[str, Any]) -> dict[str, Any]:
    return {"user": a["user"], "disabled": True, "sessions_revoked": rng.randint(0, 6)}


def _reboot(rng: random.Random, a: dict[str, Any]) -> dict[str, Any]:
    return {"rebooted": a["hosts"], "count": len(a["hosts"])}


def _scale(rng: random.Random, a: dict[str, Any]) -> dict[str, Any]:
    return {"service": a["service"], "replicas": a["replicas"], "previous": rng.randint(1, 12)}


def _weather(rng: random.Random, a: dict[str, Any]) -> dict[str, Any]:
    return {
        "city": a["city"],
        "temp_c": rng.randint(-10, 35),
        "conditions": rng.choice(("sunny", "cloudy", "rain", "snow", "windy", "fog")),
    }


def _search(rng: random.Random, a: dict[str, Any]) -> dict[str, Any]:
    return {"query": a["query"], "hits": rng.randint(0, 30), "top": f"How to handle {a['query']}"}


def _message(rng: random.Random, a: dict[str, Any]) -> dict[str, Any]:
    return {"to": a["to"], "delivered": True, "message_id": f"M-{rng.randint(1000, 99999)}"}


def _reminder(rng: random.Random, a: dict[str, Any]) -> dict[str, Any]:
    return {"reminder_id": rng.randint(1, 999), "text": a["text"], "date": a["date"]}


CONCEPTS: tuple[Concept, ...] = (
    Concept(
        "restart_service",
        "itops",
        words("restart bounce reload cycle kick"),
        words("service daemon unit process"),
        lines(
            "Restart a service on a host|Bounce a systemd unit|Restart one service on one server"
        ),
        (_HOST, _SERVICE),
        lines(
            "restart {service} on {host}|please bounce {service} on {host}|"
            "{service} is stuck on {host}, restart it|can you restart the {service} service on {host}?|"
            "kick {service} over on {host}|{host}: restart {service}|"
            "we need a restart of {service} on host {host}|cycle {service} at {host} please"
        ),
        _restart,
        lines(
            "{service} on {host} restarted and is {status} (pid {pid}).|"
            "Restarted {service} on {host}; it is {status}.|Done: {service}@{host} is {status}."
        ),
    ),
    Concept(
        "check_disk",
        "itops",
        words("check get show inspect measure"),
        words("disk disk_usage storage free_space volume"),
        lines("Disk usage of a host|How full the disks of a server are|Check free disk space"),
        (
            _HOST,
            Param(
                "path",
                words("path mount mountpoint directory"),
                "string",
                slots.path,
                required=False,
                descs=lines("Mount point to check|Which directory"),
                mention=lines("on {v}|for {v}|mount {v}|especially {v}"),
            ),
        ),
        lines(
            "how much disk is left on {host}?|check disk usage on {host}|is {host} running out of space|"
            "disk space on {host} please|{host} disk full?|show me the storage on {host}|"
            "what's the disk situation on {host}|free space check for {host}"
        ),
        _disk,
        lines(
            "{host} is at {used_percent}% on {mount} with {free_gb} GB free.|"
            "Disk on {host}: {used_percent}% used, {free_gb} GB free.|"
            "{mount} on {host} has {free_gb} GB free ({used_percent}% used)."
        ),
    ),
    Concept(
        "service_status",
        "itops",
        words("get check query show"),
        words("service_status status health unit_status"),
        lines("Status of a service on a host|Is a service running|Health of one service"),
        (_HOST, _SERVICE),
        lines(
            "is {service} running on {host}?|status of {service} on {host}|"
            "check whether {service} is up on {host}|how is {service} doing on {host}|"
            "{host}: is {service} healthy?|give me the state of {service} at {host}|"
            "did {service} crash on {host}|health check {service} on {host}"
        ),
        _status,
        lines(
            "{service} on {host} is {state} (up {uptime_h} h).|{service}@{host}: {state}.|"
            "The {service} service on {host} is {state}."
        ),
    ),
    Concept(
        "deploy",
        "itops",
        words("deploy release ship roll_out push"),
        words("service version build release app"),
        lines("Deploy a version of a service to an environment|Roll out a release|Ship a build"),
        (
            _SERVICE,
            Param(
                "version",
                words("version tag release build_version ref"),
                "string",
                slots.version,
                descs=lines("Version to deploy|Release tag"),
            ),
            Param(
                "env",
                words("environment env stage target_env"),
                "enum",
                slots.pick(_ENVS),
                enum=_ENVS,
                descs=lines("Where to deploy|Target environment"),
            ),
        ),
        lines(
            "deploy {service} {version} to {env}|ship version {version} of {service} to {env}|"
            "roll out {service} {version} on {env} please|push {version} of {service} to {env}|"
            "release {service} version {version} in {env}|can you deploy {version} ({service}) to {env}?|"
            "{env} needs {service} at {version}|put {service} {version} on {env}"
        ),
        _deploy,
        lines(
            "Deploy {deploy_id}: {service} {version} to {environment} {status}.|"
            "{service} {version} on {environment}: {status} ({deploy_id}).|"
            "Started deploy {deploy_id}; status {status}."
        ),
    ),
    Concept(
        "tail_logs",
        "itops",
        words("tail get read show fetch"),
        words("logs log_lines journal service_logs"),
        lines("Recent log lines of a service|Read the logs of a service on a host"),
        (
            _HOST,
            _SERVICE,
            Param(
                "lines",
                words("lines limit count n max_lines"),
                "integer",
                slots.integer(10, 500),
                required=False,
                descs=lines("How many lines|Number of lines"),
                mention=lines("last {v} lines|{v} lines|limit {v}|just {v} lines"),
            ),
        ),
        lines(
            "show me the {service} logs on {host}|tail {service} on {host}|"
            "what do the logs of {service} on {host} say|read {service} logs from {host}|"
            "any errors in {service} on {host}?|grab the log of {service} at {host}|"
            "{host} {service} logs please|check {service}'s journal on {host}"
        ),
        _logs,
        lines(
            "{service} on {host} logged {errors} errors; last: {last_error}.|"
            "Logs of {service}@{host}: {errors} errors, latest {last_error}.|"
            "I found {errors} errors in {service} on {host}."
        ),
    ),
    Concept(
        "open_incident",
        "itops",
        words("create open declare raise page"),
        words("incident outage alert sev"),
        lines("Declare an incident|Open an incident with a severity|Page on-call for an outage"),
        (
            Param(
                "title",
                words("title summary description name"),
                "string",
                slots.title,
                descs=lines("What is broken|Short summary"),
            ),
            Param(
                "severity",
                words("severity sev priority level"),
                "enum",
                slots.pick(("sev1", "sev2", "sev3", "sev4")),
                enum=("sev1", "sev2", "sev3", "sev4"),
                descs=lines("Severity|How bad"),
            ),
        ),
        lines(
            'open a {severity} incident "{title}"|declare {severity}: "{title}"|'
            'raise an incident "{title}", severity {severity}|we have an outage: "{title}" ({severity})|'
            'page on-call, {severity}, "{title}"|new {severity} incident titled "{title}"|'
            'create incident "{title}" at {severity}|log a {severity} for "{title}"'
        ),
        _incident,
        lines(
            "Incident {incident_id} is {state}: {title}.|Opened {incident_id} ({severity}).|"
            "Declared {incident_id}; on-call is paged."
        ),
    ),
    Concept(
        "grant_access",
        "itops",
        words("grant give add assign"),
        words("access role permission user_role"),
        lines("Give a user a role|Grant access to a user|Assign a role"),
        (
            _USER,
            Param(
                "role",
                words("role access_level permission group"),
                "enum",
                slots.pick(("admin", "viewer", "editor", "operator")),
                enum=("admin", "viewer", "editor", "operator"),
                descs=lines("Role to grant|Access level"),
            ),
        ),
        lines(
            "give {user} {role} access|make {user} an {role}|grant {role} to {user}|"
            "{user} needs {role} rights|add {user} as {role} please|can {user} get the {role} role?|"
            "set {user}'s access to {role}|assign role {role} to user {user}"
        ),
        _grant,
        lines("{user} now has the {role} role.|Granted {role} to {user}.|Done: {user} is {role}."),
    ),
    Concept(
        "disable_user",
        "itops",
        words("disable lock suspend deactivate block"),
        words("user account login user_account"),
        lines("Disable a user account and revoke sessions|Lock someone out|Suspend an account"),
        (_USER,),
        lines(
            "disable {user}|lock the account of {user}|{user} left the company, deactivate them|"
            "suspend user {user} now|please block {user}|revoke access for {user}|"
            "kill all sessions of {user} and lock them|turn off login {user}"
        ),
        _disable,
        lines(
            "{user} is disabled; {sessions_revoked} sessions revoked.|Locked {user}.|"
            "Account {user} deactivated ({sessions_revoked} sessions ended)."
        ),
    ),
    Concept(
        "reboot_hosts",
        "itops",
        words("reboot restart power_cycle reset"),
        words("hosts servers machines nodes"),
        lines("Reboot several hosts|Power-cycle a list of servers"),
        (
            Param(
                "hosts",
                words("hosts hostnames servers targets nodes"),
                "array",
                slots.host_list,
                descs=lines("Hosts to reboot|List of servers"),
            ),
            Param(
                "force",
                words("force hard forced immediate"),
                "boolean",
                slots.flag,
                required=False,
                descs=lines("Skip graceful shutdown|Force it"),
                mention=lines("and force it|hard reboot|no graceful shutdown|forcefully"),
                mention_false=lines("gracefully|not forced|clean shutdown please"),
            ),
        ),
        lines(
            "reboot {hosts}|please restart the machines {hosts}|power cycle {hosts}|"
            "{hosts} need a reboot|can you reboot {hosts}?|bounce the servers {hosts}|"
            "reboot these: {hosts}|restart hosts {hosts} please"
        ),
        _reboot,
        lines(
            "Rebooted {count} hosts.|{count} machines rebooted.|Done, {count} hosts are coming back up."
        ),
    ),
    Concept(
        "scale_service",
        "itops",
        words("scale resize set"),
        words("service replicas deployment workers"),
        lines("Set the number of replicas of a service|Scale a deployment"),
        (
            _SERVICE,
            Param(
                "replicas",
                words("replicas count instances size"),
                "integer",
                slots.integer(1, 48),
                descs=lines("How many replicas|Target count"),
            ),
        ),
        lines(
            "scale {service} to {replicas} replicas|run {replicas} instances of {service}|"
            "set {service} to {replicas}|we need {replicas} {service} pods|"
            "bump {service} up to {replicas}|resize {service} to {replicas} please|"
            "{service} should have {replicas} replicas|scale {service} = {replicas}"
        ),
        _scale,
        lines(
            "{service} scaled from {previous} to {replicas} replicas.|Now running {replicas} x {service}.|"
            "Done: {service} has {replicas} replicas (was {previous})."
        ),
    ),
)

GENERAL: tuple[Concept, ...] = (
    Concept(
        "weather",
        "general",
        words("get fetch check lookup"),
        words("weather forecast conditions"),
        lines("Current weather for a city|Weather forecast|Temperature and conditions in a city"),
        (Param("city", words("city location place town"), "string", slots.city),),
        lines(
            "what's the weather in {city}?|is it raining in {city}|weather for {city} please|"
            "how warm is it in {city} right now|forecast {city}|do I need a coat in {city} today?|"
            "tell me the weather in {city}|{city} weather?"
        ),
        _weather,
        lines(
            "It is {temp_c} °C and {conditions} in {city}.|{city}: {conditions}, {temp_c} °C.|"
            "Right now {city} has {conditions} weather at {temp_c} °C."
        ),
    ),
    Concept(
        "search_docs",
        "general",
        words("search find query lookup"),
        words("docs knowledge_base articles wiki help"),
        lines("Search the knowledge base|Find help articles|Full-text search in the docs"),
        (
            Param("query", words("query q text terms topic"), "string", slots.topic),
            Param(
                "limit",
                words("limit max_results top k"),
                "integer",
                slots.integer(1, 20),
                required=False,
                mention=lines("top {v}|max {v} results|just {v}|limit {v}"),
            ),
        ),
        lines(
            "search the docs for {query}|find articles about {query}|what does the wiki say about {query}?|"
            "look up {query} in the knowledge base|any docs on {query}|I need help with {query}|"
            "how do I do {query}? check the docs|search: {query}"
        ),
        _search,
        lines(
            "I found {hits} articles on {query}; top: {top}.|{hits} results for {query}.|"
            "Best match for {query}: {top}."
        ),
    ),
    Concept(
        "send_message",
        "general",
        words("send post write notify"),
        words("message email note chat_message"),
        lines("Send a short message to someone|Email a note to an address"),
        (
            Param("to", words("to recipient email address"), "string", slots.email),
            Param("body", words("body text message content"), "string", slots.note),
        ),
        lines(
            'send {to} a message: "{body}"|email {to} "{body}"|tell {to}: "{body}"|'
            'message {to} saying "{body}"|write to {to}: "{body}"|let {to} know "{body}"|'
            'ping {to} with "{body}"|notify {to}: "{body}"'
        ),
        _message,
        lines("Message sent to {to} ({message_id}).|Delivered to {to}.|Done, {to} got your note."),
    ),
    Concept(
        "set_reminder",
        "general",
        words("set create add schedule"),
        words("reminder alarm todo note"),
        lines("Create a reminder for a date|Schedule a reminder"),
        (
            Param("text", words("text title what message"), "string", slots.note),
            Param("date", words("date when day due"), "string", slots.date),
        ),
        lines(
            'remind me on {date}: "{text}"|set a reminder "{text}" for {date}|'
            'on {date} remind me "{text}"|add a reminder for {date}: "{text}"|'
            'don\'t let me forget "{text}" on {date}|schedule "{text}" for {date}|'
            'reminder {date} "{text}"|I need a reminder "{text}" on {date}'
        ),
        _reminder,
        lines(
            "Reminder {reminder_id} set for {date}: {text}.|OK, I'll remind you on {date}.|"
            "Scheduled for {date}: {text}."
        ),
    ),
)
