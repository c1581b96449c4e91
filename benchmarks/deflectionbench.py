"""VLM-DeflectionBench (seed 003): Algorithm 1 over KB-VQA sources, four-scenario evaluation.

Its code, layer by layer (``tests/benchmarks/test_module_lists.py`` keeps this list equal to the tree):

- sources: ``infoseek``, ``viquae``, ``evqa``, ``mragbench``, ``webqa``, ``mmdocrag`` (``sources/<name>.py``)
- ``gating/``: Stage I, parametric gating, and the prompts of every stage and the evaluation
- ``annotation/deflectionbench/``: ``pairing.py`` (Stage II, knowledge pairing), ``mining.py`` (its
  hard negatives, per source), ``oracle.py`` (Stage III, the oracle checks)
- ``evaluation/deflectionbench/``: ``scenarios.py`` (the four scenarios), ``metrics.py``, ``tables.py``
  (Tables 4 and 5, the sweeps), ``report.py`` (what a run writes), ``harness.py`` (Table 4 as
  lmms-eval tasks)
- ``releases/deflectionbench/``: ``draft.py`` (a run as a release: Tables 2 and 3, funnel, calls),
  ``checks.py`` (its Great Expectations suite), ``topics.py`` and ``topic_model.py`` (Figure 4's topics)
- ``review/deflectionbench/``: ``judges.py`` (the judge against people, Table 7)
- ``planning/deflectionbench/``: ``curation.py`` (a run's requests with early elimination)
- ``flows/deflectionbench/``: ``curate.py`` (Algorithm 1), ``recurate.py`` (Stages I and III again
  with new models), ``evaluate.py`` (one model, four scenarios)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from mmcurate.core.config import BenchmarkSection, Section, Sources, StrictModel
from mmcurate.core.errors import ConfigError
from mmcurate.core.specs import Descriptor, ImageEncoderSpec, KBSpec, MiniLM, RerankerSpec, TextEncoderSpec, WikiOffline

from .benchmark import Benchmark, Evaluation
from .shared import Decoding, PromptFile

Rule = Literal["all_incorrect", "none_correct"]


@dataclass(frozen=True)
class AnswerRule:
    """How Stage I (``gating.rule``) and Stage III (``gating.oracle_rule``) read the gating
    models' SimpleQA grades: which grades count as a model answering the question. Stage I
    drops a sample on such a grade given no context; Stage III keeps one on it given the gold
    evidence (a model that answers settles the sample). Its texts are the one statement of
    its meaning the ledger, the card and the plan use."""

    name: Rule
    answering: tuple[str, ...]  # the grades that count as answering
    stage_i: str  # the card's reading of ``gating.rule``
    stage_iii: str  # the card's reading of ``gating.oracle_rule``
    gold_drop: str  # the ledger's reason for a Stage III drop
    gate_drop: str  # the ledger's reason for a Stage I drop, ``{model}`` being the model that answered

    def answered(self, grade: str) -> bool:
        return grade in self.answering


RULES: dict[str, AnswerRule] = {
    rule.name: rule
    for rule in (
        AnswerRule(
            "all_incorrect",
            ("CORRECT", "NOT_ATTEMPTED"),  # eq. 4 of the main text: a NOT_ATTEMPTED answers too
            stage_i="a sample is kept only when every gating model is INCORRECT without context (the paper's)",
            stage_iii="a sample is discarded only when every gating model is INCORRECT with the gold evidence",
            gold_drop="every model answered INCORRECT even with the gold contexts",
            gate_drop="{model} was not judged INCORRECT",
        ),
        AnswerRule(
            "none_correct",
            ("CORRECT",),  # the appendix pseudo-code as OCR'd
            stage_i="a sample is kept unless some gating model is CORRECT without context",
            stage_iii="a sample is discarded unless some gating model is CORRECT with the gold evidence",
            gold_drop="no model answered CORRECT even with the gold contexts",
            gate_drop="{model} answered CORRECT",
        ),
    )
}


def answer_rule(name: str, what: str) -> AnswerRule:
    """The rule ``name``; ``what`` names the config setting it came from in the error."""
    try:
        return RULES[name]
    except KeyError:
        raise ConfigError(f"unknown {what} rule {name!r}; known: {', '.join(RULES)}") from None


class GatingConfig(StrictModel):
    """The gating models and the two rules that read their grades (see gating/parametric.py
    for Stage I and annotation/deflectionbench/oracle.py for Stage III solvability)."""

    pool: list[str] = Field(min_length=1)  # ordered keys of Settings.models
    rule: Rule = "all_incorrect"  # Stage I: keep only if every model is INCORRECT without context
    oracle_rule: Rule = "all_incorrect"  # Stage III: discard only if every model is INCORRECT with gold
    # Stage I and III prompts ask for a best guess when unsure (not the paper's: an abstention,
    # which drops a Stage I sample, then tends to become an INCORRECT answer, which keeps it)
    force_guess: bool = False


Share = Annotated[float, Field(ge=0.0, le=1.0)]


LeakageFilter = Literal["none", "answer", "answer_or_overlap"]


class RetrievalConfig(StrictModel):
    """Stage II of DeflectionBench: what is searched, with which encoders, how it is cut.

    ``leakage_filter`` names which mined passages are removed before reranking besides the
    gold contexts themselves (DeflectionBench's ``mining.py``): ``none`` (the paper's eq. 2;
    leaks are left to the eq. 5 distractor check), ``answer`` (also passages holding a gold
    answer) or ``answer_or_overlap`` (also passages overlapping a gold text)."""

    text_encoder: TextEncoderSpec = MiniLM()
    image_encoder: ImageEncoderSpec = Descriptor()
    kb: KBSpec = WikiOffline()  # documents {doc_id, title, text} (see retrieval.kb)
    kb_limit: int | None = Field(default=None, ge=1)  # use only the first N KB documents (demo speed)
    chunk_unit: Literal["tokens", "words"] = "tokens"
    chunk_size: int = Field(default=250, ge=1)
    chunk_overlap: int = Field(default=32, ge=0)
    reranker: RerankerSpec = MiniLM()
    max_text_negatives: int = Field(default=10, ge=0)
    leakage_filter: LeakageFilter = "none"
    # memory for the KB's vector index (retrieval.index_plan): a KB whose vectors fit keeps the
    # in-memory flat/IVF index; a larger one gets an on-disk store and a compressed index
    memory_gb: float = Field(default=4.0, ge=0.25, le=4096)
    # pages the text encoder embeds per second, for `mmcurate plan` (default: planning.throughput)
    encoder_pages_per_second: float | None = Field(default=None, gt=0)

    @model_validator(mode="before")
    @classmethod
    def _moved(cls, value: Any) -> Any:
        moved = sorted({"top_pages", "top_images"} & set(value)) if isinstance(value, dict) else []
        if moved:
            raise ValueError(
                f"{', '.join(moved)} moved to the benchmark's mining.<source>.top_k (seed 003 retrieves per source)"
            )
        return value

    @model_validator(mode="after")
    def _overlap_below_size(self) -> RetrievalConfig:
        if self.chunk_overlap >= self.chunk_size:
            raise ValueError(
                f"chunk_overlap ({self.chunk_overlap}) must be smaller than chunk_size ({self.chunk_size})"
            )
        return self


MiningStrategy = Literal["image_to_text", "image_to_image_pages", "image_to_image", "source"]
# the strategies that search a KB's pages (image_to_image_pages by text embedding when the KB names no page image)
PAGE_STRATEGIES = ("image_to_text", "image_to_image_pages")


class SourceMining(StrictModel):
    """How Stage II finds one source's negatives (annotation/deflectionbench/mining.py; seed 003,
    appendix "Knowledge pairing"): ``image_to_text`` (KB pages retrieved for the query, the top
    ``top_k`` cut into passages and reranked), ``image_to_image_pages`` (KB pages whose first image
    is nearest the query image, the top ``top_k`` cut and reranked), ``image_to_image`` (the
    ``top_k`` nearest images of the source's own pool, gold excluded) or ``source`` (the
    negatives the source provides; no retrieval).

    ``kb``: the knowledge base a page strategy searches for this source; None: the shared
    ``retrieval.kb``. The appendix gives each text source its KB: InfoSeek's is the 6M-entity
    Wikipedia dump, E-VQA's "the dataset-provided collection of Wikipedia pages (about 2M
    entries), which differs from the full 6M-page dump used for InfoSeek" (seed 003, L1397-1408)."""

    strategy: MiningStrategy
    top_k: int = Field(default=10, ge=1, le=1000)
    kb: KBSpec | None = None

    @model_validator(mode="after")
    def _kb_is_searched(self) -> SourceMining:
        if self.kb is not None and self.strategy not in PAGE_STRATEGIES:
            raise ValueError(f"kb is searched only by {' and '.join(PAGE_STRATEGIES)}, not {self.strategy}")
        return self

    def retrieval(self, shared: RetrievalConfig) -> RetrievalConfig:
        """``shared`` searching this source's own KB, if it has one."""
        return shared if self.kb is None else shared.model_copy(update={"kb": self.kb})


# the appendix's paragraph on retrieval per dataset (seed 003)
PAPER_MINING: dict[str, SourceMining] = {
    "infoseek": SourceMining(strategy="image_to_text", top_k=10),
    "viquae": SourceMining(strategy="image_to_text", top_k=10),
    "evqa": SourceMining(strategy="image_to_image_pages", top_k=5),
    "mragbench": SourceMining(strategy="image_to_image", top_k=20),
    "webqa": SourceMining(strategy="source"),
    "mmdocrag": SourceMining(strategy="source"),
}


class TopicsConfig(StrictModel):
    """The topic distribution before and after curation (seed 003, appendix C: BERTopic over
    question embeddings, reduced with UMAP, clustered with HDBSCAN "using cluster probability
    scores"; releases/deflectionbench/topics.py, releases/deflectionbench/topic_model.py).

    ``reading``: ``bertopic`` (the paper's) or ``source_fields`` (each source's own category
    field). UMAP and HDBSCAN sizes are BERTopic's defaults, capped for small pools (see
    ``topic_model.adapted``); below ``min_samples`` questions the source fields are read instead,
    and the card says so. ``outliers: probabilities`` gives HDBSCAN's outliers their most probable
    cluster (our reading of "using cluster probability scores"); ``keep`` leaves them a topic of
    their own. The paper embeds with OpenAI text-embedding-3-large; ``text_encoder`` stands in.

    ``fit_sample``: None (the paper's reading: appendix C clusters the questions of the whole pool)
    fits BERTopic on every question; a number fits it on a seeded subsample of that many
    questions (``seed``) and assigns every other question to the fitted clusters in batches
    (BERTopic's ``transform``: UMAP's transform and HDBSCAN's soft clustering), so a pool of a
    million questions is never embedded or reduced at once. The card says which ran."""

    reading: Literal["bertopic", "source_fields"] = "bertopic"
    text_encoder: TextEncoderSpec = MiniLM()
    min_samples: int = Field(default=20, ge=5, le=1_000_000)
    n_neighbors: int = Field(default=15, ge=2, le=200)  # UMAP (BERTopic's default 15)
    n_components: int = Field(default=5, ge=2, le=100)  # UMAP (BERTopic's default 5)
    min_cluster_size: int = Field(default=10, ge=2, le=100_000)  # HDBSCAN (BERTopic's default 10)
    outliers: Literal["probabilities", "keep"] = "probabilities"
    fit_sample: int | None = Field(default=None, ge=100, le=1_000_000)  # None: fit on every question (the paper's)


class DeflectionBenchConfig(BenchmarkSection):
    sources: Sources
    gating: GatingConfig
    retrieval: RetrievalConfig = Field(default_factory=RetrievalConfig)
    prompts: PromptFile | None = None  # None: the built-in templates of gating/prompts.py
    # per source, how Stage II finds negatives; a source left out keeps the paper's (PAPER_MINING)
    mining: dict[str, SourceMining] = Field(default_factory=lambda: dict(PAPER_MINING))
    topics: TopicsConfig = Field(default_factory=TopicsConfig)
    k_min: int = Field(default=5, ge=1)
    seed: int = Field(default=0, ge=0)
    # samples per streamed shard of the curation: Stages I-III read, and spill to Parquet under the
    # run folder, this many samples at a time (the flow, tasks/stages.py); the release does not depend on it
    shard_size: int = Field(default=50_000, ge=1, le=1_000_000)
    version: str = "1.0.0"
    source_mix: dict[str, tuple[Share, Share]] = Field(default_factory=dict)  # source -> (min, max) share

    @field_validator("mining", mode="before")
    @classmethod
    def _paper_strategy(cls, value: Any) -> Any:
        """A paper source's entry that names no strategy (``evqa: {kb: ...}``) keeps the paper's
        strategy and top-k."""
        if not isinstance(value, dict):
            return value
        return {
            source: {**PAPER_MINING[source].model_dump(exclude={"kb"}), **entry}
            if isinstance(entry, dict) and "strategy" not in entry and source in PAPER_MINING
            else entry
            for source, entry in value.items()
        }

    @field_validator("mining")
    @classmethod
    def _paper_mining(cls, value: dict[str, SourceMining]) -> dict[str, SourceMining]:
        return {**PAPER_MINING, **value}

    @field_validator("source_mix")
    @classmethod
    def _low_high(cls, value: dict[str, tuple[float, float]]) -> dict[str, tuple[float, float]]:
        bad = {name: pair for name, pair in value.items() if pair[0] > pair[1]}
        if bad:
            raise ValueError(f"each share range is (min, max) with min <= max, got {bad}")
        return value

    def read_files(self, where: str) -> None:
        """Read the prompt-template file (after its path is resolved)."""
        if self.prompts is not None:
            self.prompts = self.prompts.read_at(f"{where}.prompts")

    def roles(self, judge: str | None) -> list[tuple[str, str]]:
        return [("gating", name) for name in self.gating.pool] + ([("judge", judge)] if judge else [])

    def recuration_roles(self) -> tuple[str, ...]:
        return ("gating",)

    def add_recuration_model(self, role: str, name: str) -> None:
        """A new gating model joins the pool after the models the release was made with."""
        if name not in self.gating.pool:
            self.gating.pool = [*self.gating.pool, name]


TABLE4_NEGATIVES = 2  # seed 003, Table 4's caption: "The number of negatives is fixed at 2"
# The most negatives a sample keeps (Stage II's cap, which the plan assumes too) and the most an
# evaluation shows: the widest retrieval of the appendix, MRAG-Bench's top-20 images (seed 003,
# L1415); Table 3's 11.8 negatives per sample on average need more than 10. Figure 3 sweeps 1 to 10.
MAX_NEGATIVES = 20


class DeflectionEvalConfig(Section):
    """DeflectionBench's evaluation (evaluation/deflectionbench/scenarios.py, evaluation/deflectionbench/report.py)."""

    # n of Table 4's realistic and adversarial rows (per scenario, per source, CRAG); the other
    # n a run asks for go to the sweep table (Figure 3)
    table_negatives: int = Field(default=TABLE4_NEGATIVES, ge=1, le=MAX_NEGATIVES)
    decoding: Decoding = Field(default_factory=Decoding)

    def references(self, judge: str | None) -> list[str]:
        return list(self.decoding.closed_apis or [])


class VerifyFirstConfig(Section):
    """Who routes and who checks in ``--system verify-first`` (CRUISE's gate on DeflectionBench):
    None is the answering model (as in CRUISE); ``verifier: lexical`` is the offline stand-in for
    the consistency judge and the chain of verification (``evaluation.verify_first``)."""

    router: str | None = None
    verifier: str | None = None

    def references(self, judge: str | None) -> list[str]:
        return [name for name in (self.router, self.verifier) if name and name != "lexical"]


BENCHMARK = Benchmark(
    name="deflectionbench",
    config=DeflectionBenchConfig,
    evaluation_config=DeflectionEvalConfig,
    evaluation_sections={"verify_first": VerifyFirstConfig},
    curated=True,
    title="VLM-DeflectionBench (Algorithm 1) and publish a validated release",
    paper="003_26e6cf169dd21fb6.txt",
    sources=("infoseek", "evqa", "webqa", "mmdocrag", "mragbench", "viquae"),
    evaluation=Evaluation(
        options=("scenarios", "n_negatives", "abstention", "strictness_sweep", "modality_analysis", "system"),
    ),
)
