"""``EmbeddedModel``'s decoding defaults, each with where it was measured.

Every default here was chosen on held-out sets and is documented in
docs/constraints.md; ``EmbeddedModel``'s arguments and a step's ``settings``
override the ones that are knobs.
"""

from __future__ import annotations

from agentflow.engine.argument_fit import DEFAULT_WEIGHT as FIT_WEIGHT
from agentflow.engine.tool_priors import DEFAULT_ANSWER_BONUS
from agentflow.engine.tool_ranker import DEFAULT_WEIGHT as RANKER_WEIGHT
from agentflow.engine.tool_relevance import DEFAULT_WEIGHT as RELEVANCE_WEIGHT
from agentflow.engine.tool_similarity import DEFAULT_WEIGHT as SIMILARITY_WEIGHT

#: ``GenerationConfig.text_threshold`` by default: chosen on a held-out set of its own
#: (docs/constraints.md, "Free text, one sure token at a time").
TEXT_THRESHOLD = 0.99
#: Constraint sessions keep the output on the tokenizer's own segmentation (measured on
#: three held-out sets: docs/constraints.md, "Canonical pairs").
CANONICAL = True
#: Diffusion steps offer the request's spans whole where a string value opens
#: (measured on three held-out sets: docs/constraints.md, "Copy choices").
COPY = True
#: ... and inside free text finish a value of the sources the output has started to
#: quote (docs/constraints.md, "Copies inside free text").
COPY_WITHIN_TEXT = True
#: Weight of the request's word overlap with each tool in tool-name choices
#: (measured on held-out sets: docs/constraints.md, "Tool relevance").
TOOL_RELEVANCE = RELEVANCE_WEIGHT
#: Weight of each tool's similarity in meaning to the request (word vectors), with
#: the same measurements (docs/constraints.md, "Tool similarity").
TOOL_SIMILARITY = SIMILARITY_WEIGHT
#: Weight of the learned tool ranker's score of each tool (docs/constraints.md,
#: "Tool ranker").
TOOL_RANKER = RANKER_WEIGHT
#: Bonus of answering over calling a tool where the request looks like one no tool
#: serves (docs/constraints.md, "Requests no tool serves").
ANSWER_BONUS = DEFAULT_ANSWER_BONUS
#: Penalty on a tool's name per kind of value the request cannot give it (an e-mail
#: and no parameter for one, a required number and no number; docs/constraints.md,
#: "Argument fit").
ARGUMENT_FIT = FIT_WEIGHT
#: Decode a message holding several requests one request at a time and join their
#: calls (docs/constraints.md, "Requests decoded one by one").
SPLIT_REQUESTS = True
#: Where an action's calls leave a part of the request with values untouched, decode
#: one more call for it (docs/constraints.md, "Follow-up calls").
FOLLOW_UP_CALLS = True
#: Drop the calls after an action's first that take no new value from the conversation
#: where the calls left serve the whole request (docs/constraints.md, "Redundant calls").
DROP_REDUNDANT_CALLS = True
#: Put back the request's values that a call wrote almost right ("11669" for "#86669")
#: where the conversation holds the written one nowhere (docs/constraints.md, "Near copies").
RESTORE_NEAR_COPIES = True
#: Drop optional arguments (not enums) whose string or number the conversation holds
#: nowhere (docs/constraints.md, "Made-up options").
DROP_MADE_UP_OPTIONS = True
#: Where the first call's tool name won by less than this (log-space), decode the step
#: again with the runner-up and keep the decode the model is surer of after the name
#: (docs/constraints.md, "A second decode for a close tool choice").
SECOND_CHOICE = 3.0
