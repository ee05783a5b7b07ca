"""The bonuses one agent step's decoding takes from its request and its tools.

Six priors, each measured on held-out sets (docs/constraints.md):

- the words the request shares with each tool (:mod:`.tool_relevance`), its
  similarity in meaning to each (:mod:`.tool_similarity`) and the learned tool
  ranker's score of each (:mod:`.tool_ranker`), added up as bonuses
  on the tool-name choice (``ConstraintSession.prefer(..., once=True)``: a tool
  is favoured for one call of the step, not again for a parallel call after it);
- the tools the request's values cannot fill (:mod:`.argument_fit`: an e-mail
  and no parameter for one, a numeric parameter and no number), penalised on the
  same choice for every call of the step (``prefer(..., lasting=...)``);
- the sign of a request no tool serves ("thanks, bye": no value, no word and no
  meaning close to a tool), which gives answering a bonus over calling
  (``ConstraintSession.prefer_keys``), and after tool results its mirror: a
  change the request asked for that no call made yet gives calling the bonus.

:func:`step_bonuses` works them out together, reading the word overlap and the
vectors once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .argument_fit import ToolWithSchema, fit_bonuses
from .asked_changes import owes_change
from .call_coverage import request_values
from .tool_ranker import ToolRanker
from .tool_relevance import DescribedTool, as_bonuses, check_weight, holds_values, relevance
from .tool_similarity import WordVectors, centred, cosines

#: A request no listed tool comes this close to (cosine similarity, not centred),
#: that shares no word with any and holds no value, is taken for one no tool serves.
NO_TOOL_SIMILARITY = 0.1
#: Log-space bonus of the ``final`` key over ``tool_calls`` for such a request:
#: ``EmbeddedModel``'s default (``agentflow eval --answer-bonus`` is off unless given).
DEFAULT_ANSWER_BONUS = 8.0


@dataclass(frozen=True)
class StepBonuses:
    """What a step's constraint session is given: tool-name and key bonuses."""

    #: For ``ConstraintSession.prefer(tools, once=True)`` (empty: none).
    tools: dict[str, float] = field(default_factory=dict)
    #: For ``ConstraintSession.prefer_keys`` (empty: none).
    keys: dict[str, float] = field(default_factory=dict)
    #: Tool-name bonuses for every call of the step (``prefer(..., lasting=...)``):
    #: the argument-fit penalties (empty: none).
    lasting: dict[str, float] = field(default_factory=dict)

    def apply(self, session: Any) -> None:
        """Give ``session`` the bonuses there are."""
        if self.tools or self.lasting:
            session.prefer(self.tools, once=True, lasting=self.lasting)
        if self.keys:
            session.prefer_keys(self.keys)


def step_bonuses(
    request: str,
    tools: Sequence[ToolWithSchema],
    *,
    relevance_weight: float,
    similarity_weight: float,
    answer_bonus: float,
    vectors: WordVectors | None,
    fit_weight: float = 0.0,
    ranker: ToolRanker | None = None,
    ranker_weight: float = 0.0,
    called: Sequence[str] | None = None,
) -> StepBonuses:
    """The bonuses of a step on ``request`` with ``tools``: the word overlap times
    ``relevance_weight`` plus the centred similarity times ``similarity_weight`` plus
    ``ranker``'s centred scores times ``ranker_weight`` for the tool names, and
    ``{"final": answer_bonus, "tool_calls": 0}`` for the action's first key where
    :func:`serves_no_tool`. ``vectors`` is needed when the similarity weight or the
    answer bonus is not 0 (ValueError otherwise, and for a weight out of range);
    ``ranker`` is needed when ``ranker_weight`` is not 0.

    With ``fit_weight``, the argument-fit penalties are the lasting bonuses, and a
    tool the request's values cannot fill gets none of the name bonuses above 0:
    the words say what the request is about, not that the tool can serve it
    ("refund everything on order 606333" names the refund and gives it no amount;
    the order lookup comes first).

    ``called`` names the tools called since the request (None: the step follows the
    request). Where a kind of change the request names is still owed after them
    (:func:`~.asked_changes.owes_change`), calling gets ``answer_bonus`` over
    answering: the answer bonus's mirror."""
    relevance_weight = check_weight(relevance_weight, "tool relevance weight")
    similarity_weight = check_weight(similarity_weight, "tool similarity weight")
    answer_bonus = check_weight(answer_bonus, "answer bonus")
    fit_weight = check_weight(fit_weight, "argument fit weight")
    ranker_weight = check_weight(ranker_weight, "tool ranker weight")
    if ranker_weight > 0 and ranker is None:
        raise ValueError("a tool ranker weight needs a tool ranker")
    if not tools:
        return StepBonuses()
    overlap = relevance(request, tools)
    found: list[float] | None = None
    if similarity_weight > 0 or answer_bonus > 0:
        if vectors is None:
            raise ValueError("tool similarity and the answer bonus need word vectors")
        found = cosines(request, tools, vectors)
    names = as_bonuses(overlap, relevance_weight)
    for name, bonus in as_bonuses(centred(tools, found), similarity_weight).items():
        names[name] = names.get(name, 0.0) + bonus
    if ranker is not None:
        for name, bonus in ranker.bonuses(request, tools, ranker_weight).items():
            names[name] = names.get(name, 0.0) + bonus
    keys: dict[str, float] = {}
    if answer_bonus > 0 and called is not None and owes_change(request, tools, called):
        keys = {"tool_calls": answer_bonus, "final": 0.0}
    elif answer_bonus > 0 and _no_tool(request, overlap, found):
        keys = {"final": answer_bonus, "tool_calls": 0.0}
    fit = fit_bonuses(request, tools, fit_weight)
    for name, penalty in fit.items():
        if penalty < 0 and names.get(name, 0.0) > 0:
            names[name] = 0.0
    return StepBonuses(names, keys, fit)


def serves_no_tool(request: str, tools: Sequence[DescribedTool], vectors: WordVectors) -> bool:
    """True when ``request`` looks like one no listed tool serves ("thanks, bye",
    "tell me a joke"): it quotes nothing and holds no value-like
    token (an id, a host, an e-mail, a number) and no value a clause holds in
    words (:func:`~.call_coverage.request_values`: "how warm is it in *Oslo*"
    names a place a tool can take, whatever its words), shares no word with any tool
    (:func:`~.tool_relevance.relevance`) and comes within ``NO_TOOL_SIMILARITY`` of
    none in meaning; False when no tool is listed."""
    if not tools:
        return False
    return _no_tool(request, relevance(request, tools), cosines(request, tools, vectors))


def _no_tool(request: str, overlap: dict[str, float], found: list[float] | None) -> bool:
    if holds_values(request) or any(overlap.values()) or request_values(request):
        return False
    return found is None or max(found) < NO_TOOL_SIMILARITY
