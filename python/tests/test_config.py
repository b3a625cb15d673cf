"""skippr.Config, the connector classes, Pipeline/Transform and the merge-writer (Config.save).

Run: PYTHONPATH=build/python /usr/bin/python3 -m pytest python/tests/test_config.py
Everything here is files in tmp_path; the doctor test runs this build's skipprd.
"""

from __future__ import annotations

import difflib
import importlib.util
import os
import pathlib
import subprocess
import textwrap

import pytest

import skippr
from skippr import _engine
from skippr.config import (AggregateMeasure, Config, DataSinkRef, DataSourceRef,
                           DeadletterSinkRef, EnvRef, Pipeline, PipelineRef, Transform,
                           TransformAggregate)
from skippr.connectors import (CONNECTOR_CLASSES, DataSinkDuckdb, DataSinkPostgres,
                               DataSinkSkipprLake, DataSourceFile, DataSourcePostgres,
                               DataSourceS3, DataSourceSample)
from ruamel.yaml import YAML

from conftest import SEED_EXAMPLE

REPO = pathlib.Path(__file__).resolve().parents[2]

# A file as people write them: comments everywhere, 4-space indentation, quoted values, flow maps,
# a blank line between sections, an entry and a pipeline Python never touches.
COMMENTED_CONFIG = """\
# Shop ingest: owned by data-eng.
skippr:
    workspace: "prod"   # changing it restarts every pipeline

data_sources:
    pg:
        Postgres: { host: db.example.com, port: 5432, password: "${PG_PASSWORD}", database: shop }
    files:   # nightly drops
        File:
            path: './input'
            primary_key:
              - id
data_sinks:
    lake: {SkipprLake: {warehouse: "file:///srv/lake"}}
    files_lake:
        SkipprLake:
            warehouse: file:///srv/lake
            table_namespace: files   # one namespace per pipeline

pipelines:
    invoices:
        data_source: data_sources.pg
        data_sink: data_sinks.lake
        sync_frequency_seconds: 60   # every minute
    files:
        data_source: data_sources.files
        data_sink: data_sinks.files_lake
        transform:
            namespace_fields: [region]
            ops:
              - rename: { start_time: started_at }
# end of file
"""


ROUND_TRIP_FILES = {
    "commented": COMMENTED_CONFIG,
    "odd_indentation": textwrap.dedent("""\
        data_sources:
           src:
                 Sample: {rows: 10}
        pipelines:
         p:
          data_source: data_sources.src
          transform:
            ops:
            - drop: [a]
            -   select:   [b,c]
        """),
    "quoted_values": textwrap.dedent("""\
        skippr: {workspace: 'single', tenant: "double"}
        data_sources:
          "src": {File: {path: "./in put", format: 'csv', batch_size_bytes: "1000"}}
        pipelines:
          'p': {data_source: "data_sources.src", chaos_mode: 'no'}
        """),
    "three_space_indentation": textwrap.dedent("""\
        data_sources:
           src:
              Sample: { rows: 10 }    # a flow map with spaces inside
        pipelines:
           p:
              data_source: data_sources.src
              transform:
                 ops:
                 - drop: [ a ]
                 - select: [b,c]
        """),
    "flow_maps": '{data_sources: {s: {Sample: {}}}, pipelines: {p: {data_source: data_sources.s}}}',
    "markers_and_crlf": "---\r\n# a file saved on Windows\r\ndata_sources:\r\n  s:\r\n"
                        "    Sample: {}\r\n...\r\n",
    "empty": "",
    "comments_only": "# to be filled in by Config.save\n",
}


def write(path: pathlib.Path, text: str) -> pathlib.Path:
    path.write_bytes(text.encode("utf-8"))
    return path


def read(path: pathlib.Path) -> str:
    return path.read_bytes().decode("utf-8")


def parsed(text: str):
    return YAML(typ="safe").load(text)


def removed_lines(before: str, after: str) -> list[str]:
    """Lines of `before` that `after` lost or changed."""
    diff = difflib.ndiff(before.splitlines(), after.splitlines())
    return [line[2:] for line in diff if line.startswith("- ")]


@pytest.fixture
def commented_file(tmp_path: pathlib.Path) -> pathlib.Path:
    return write(tmp_path / "skippr.yml", COMMENTED_CONFIG)


# ----- round trips --------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(ROUND_TRIP_FILES))
def test_load_then_save_with_nothing_changed_keeps_the_file_byte_for_byte(tmp_path, name):
    path = write(tmp_path / "skippr.yml", ROUND_TRIP_FILES[name])
    cfg = Config.load(path)
    assert cfg.to_yaml() == ROUND_TRIP_FILES[name]
    cfg.save()
    assert read(path) == ROUND_TRIP_FILES[name]


def test_registering_what_the_file_already_says_changes_nothing(commented_file):
    cfg = Config.load(commented_file)
    cfg.workspace("prod")
    cfg.data_source("files", DataSourceFile(path="./input"))
    cfg.pipeline("invoices", Pipeline(data_source=cfg.get_data_source("pg"),
                                      sync_frequency_seconds=60))
    cfg.save()
    assert read(commented_file) == COMMENTED_CONFIG


def test_a_change_rewrites_only_the_lines_it_touches(commented_file):
    cfg = Config.load(commented_file)
    cfg.pipeline("invoices", Pipeline(data_source=cfg.get_data_source("pg"),
                                      sync_frequency_seconds=120))
    cfg.save()
    saved = read(commented_file)
    assert removed_lines(COMMENTED_CONFIG, saved) == [
        "        sync_frequency_seconds: 60   # every minute"]
    assert "        sync_frequency_seconds: 120  # every minute" in saved.splitlines()


def test_unusual_but_consistent_indentation_survives_a_change(tmp_path):
    text = ROUND_TRIP_FILES["three_space_indentation"]
    path = write(tmp_path / "skippr.yml", text)
    cfg = Config.load(path)
    cfg.pipeline("p", Pipeline(data_source=cfg.get_data_source("src"), chaos_mode=True))
    cfg.save()
    saved = read(path)
    assert removed_lines(text, saved) == []
    assert parsed(saved)["pipelines"]["p"]["chaos_mode"] is True


def test_a_file_of_comments_keeps_them_above_what_is_added(tmp_path):
    path = write(tmp_path / "skippr.yml", ROUND_TRIP_FILES["comments_only"])
    cfg = Config.load(path)
    cfg.data_source("s", DataSourceSample())
    cfg.save()
    assert read(path) == "# to be filled in by Config.save\ndata_sources:\n  s:\n    Sample: {}\n"


def test_crlf_files_stay_crlf_after_a_change(tmp_path):
    path = write(tmp_path / "skippr.yml", ROUND_TRIP_FILES["markers_and_crlf"])
    cfg = Config.load(path)
    cfg.workspace("w")
    cfg.save()
    saved = read(path)
    assert saved.count("\n") == saved.count("\r\n")
    assert "# a file saved on Windows" in saved
    assert parsed(saved) == {"skippr": {"workspace": "w"}, "data_sources": {"s": {"Sample": {}}}}


# ----- the seed example ---------------------------------------------------------------------------

def test_the_materialised_views_seed_example_runs_verbatim(commented_file, monkeypatch):
    monkeypatch.chdir(commented_file.parent)
    exec(compile(SEED_EXAMPLE, "materialised-views.txt", "exec"), {})

    saved = read(commented_file)
    assert removed_lines(COMMENTED_CONFIG, saved) == []  # comments, untouched entries kept
    _engine.check_config(saved, "skippr.yml")
    invoices = parsed(saved)["pipelines"]["invoices"]
    assert invoices["sync_frequency_seconds"] == 60
    assert invoices["transform"]["aggregates"] == [{
        "id": "customer_invoice_totals",
        "key_fields": ["customer_id"],
        "measures": {"invoice_total": {"sum": "amount"}, "invoice_count": {"count": "*"}},
    }]
    assert '                    invoice_count: {count: "*"}' in saved.splitlines()


# ----- merge rules --------------------------------------------------------------------------------

def test_each_passed_setting_replaces_that_setting_and_the_others_stay(commented_file):
    cfg = Config.load(commented_file)
    cfg.data_source("files", DataSourceFile(path="./incoming", format="csv"))
    cfg.save()
    files = parsed(read(commented_file))["data_sources"]["files"]
    assert files == {"File": {"path": "./incoming", "primary_key": ["id"], "format": "csv"}}
    assert "            path: './incoming'" in read(commented_file)  # the author's quotes


def test_each_passed_pipeline_field_replaces_that_field(commented_file):
    cfg = Config.load(commented_file)
    cfg.pipeline("invoices", Pipeline(data_source=cfg.get_data_source("files"),
                                      data_dir="/srv/data"))
    cfg.save()
    invoices = parsed(read(commented_file))["pipelines"]["invoices"]
    assert invoices == {"data_source": "data_sources.files", "data_sink": "data_sinks.lake",
                        "sync_frequency_seconds": 60, "data_dir": "/srv/data"}


def test_a_transform_merges_one_level_deeper(commented_file):
    cfg = Config.load(commented_file)
    source = cfg.get_data_source("files")
    cfg.pipeline("files", Pipeline(data_source=source, transform=Transform(ops=[{"drop": "x"}])))
    cfg.save()
    transform = parsed(read(commented_file))["pipelines"]["files"]["transform"]
    assert transform == {"namespace_fields": ["region"], "ops": [{"drop": "x"}]}
    assert read(commented_file).endswith("              - drop: x\n# end of file\n")

    cfg.pipeline("files", Pipeline(data_source=source, transform=Transform(flatten_events=True)))
    cfg.save()
    transform = parsed(read(commented_file))["pipelines"]["files"]["transform"]
    assert transform == {"namespace_fields": ["region"], "ops": [{"drop": "x"}],
                         "flatten_events": True}


def test_new_entries_and_pipelines_land_after_the_last_lines_of_their_section(commented_file):
    cfg = Config.load(commented_file)
    sample = cfg.data_source("sample", DataSourceSample(rows=5))
    cfg.pipeline("sampled", Pipeline(data_source=sample))
    cfg.tenant("acme")
    cfg.save()
    saved = read(commented_file)
    assert removed_lines(COMMENTED_CONFIG, saved) == []
    assert saved.endswith("    sampled:\n        data_source: data_sources.sample\n# end of file\n")
    assert parsed(saved)["skippr"] == {"workspace": "prod", "tenant": "acme"}
    assert parsed(saved)["data_sources"]["sample"] == {"Sample": {"rows": 5}}


def test_an_entry_may_not_change_kind(commented_file):
    cfg = Config.load(commented_file)
    with pytest.raises(ValueError, match=r"data_sources\.pg already uses Postgres"):
        cfg.data_source("pg", DataSourceFile(path="./x"))


def test_save_merges_into_the_file_as_it_is_now(commented_file):
    cfg = Config.load(commented_file)
    cfg.data_source("sample", DataSourceSample())
    write(commented_file, COMMENTED_CONFIG + "# added by someone else\n")
    cfg.save()
    saved = read(commented_file)
    assert "# added by someone else" in saved
    assert "sample" in parsed(saved)["data_sources"]


def test_a_kind_change_made_on_disk_meanwhile_is_refused_and_nothing_written(commented_file):
    cfg = Config.load(commented_file)
    cfg.data_source("new", DataSourceSample())
    on_disk = COMMENTED_CONFIG.replace("data_sources:\n",
                                       "data_sources:\n    new: {File: {path: x}}\n")
    write(commented_file, on_disk)
    with pytest.raises(ValueError, match=r"data_sources\.new already uses File"):
        cfg.save()
    assert read(commented_file) == on_disk


def test_nothing_is_written_when_the_engine_refuses_the_merged_file(commented_file):
    cfg = Config.load(commented_file)
    cfg.workspace("changed")
    # A second sink on the warehouse and namespace of data_sinks.lake breaks a whole-file rule.
    cfg.data_sink("twin", DataSinkSkipprLake(warehouse="file:///srv/lake"))
    with pytest.raises(skippr.ConfigError, match=r"skippr\.yml:\d+:\d+: data_sinks\.twin: uses"):
        cfg.save()
    assert read(commented_file) == COMMENTED_CONFIG
    assert sorted(os.listdir(commented_file.parent)) == ["skippr.yml"]  # no temp file left


def test_a_pipeline_naming_a_missing_entry_is_refused_at_save(tmp_path):
    cfg = Config()
    ref = DataSourceRef(cfg, "missing")  # made by hand, not by cfg: it names nothing
    cfg.pipeline("p", Pipeline(data_source=ref))
    with pytest.raises(skippr.ConfigError, match="references 'data_sources.missing'"):
        cfg.save(tmp_path / "skippr.yml")
    assert not (tmp_path / "skippr.yml").exists()


def test_saving_a_loaded_config_elsewhere_writes_all_of_it(commented_file, tmp_path):
    cfg = Config.load(commented_file)
    cfg.tenant("acme")
    copy_path = tmp_path / "copy.yaml"
    cfg.save(copy_path)
    assert cfg.path == str(copy_path)
    assert read(commented_file) == COMMENTED_CONFIG
    copied = read(copy_path)
    assert "# end of file" in copied
    assert parsed(copied) == {**parsed(COMMENTED_CONFIG),
                              "skippr": {"workspace": "prod", "tenant": "acme"}}


def test_saved_file_keeps_its_mode(commented_file):
    os.chmod(commented_file, 0o640)
    cfg = Config.load(commented_file)
    cfg.tenant("t")
    cfg.save()
    assert os.stat(commented_file).st_mode & 0o777 == 0o640


# ----- files and paths ----------------------------------------------------------------------------

def test_save_needs_a_path_when_nothing_was_loaded():
    with pytest.raises(ValueError, match=r"^Config was not loaded from a file; call save\(path\)$"):
        Config().save()


@pytest.mark.parametrize("name", ["skippr.json", "skippr.toml", "skippr"])
def test_save_writes_yaml_only(tmp_path, name):
    with pytest.raises(ValueError, match="YAML only"):
        Config().save(tmp_path / name)
    assert not (tmp_path / name).exists()


def test_a_new_config_saves_a_file_the_engine_loads(tmp_path):
    cfg = Config().workspace("w")
    source = cfg.data_source("s", DataSourceFile(path="./in", primary_key=["id"]))
    cfg.pipeline("p", Pipeline(data_source=source))
    path = tmp_path / "skippr.yaml"
    expected = cfg.to_yaml()
    cfg.save(path)
    assert read(path) == expected
    assert parsed(expected) == {"skippr": {"workspace": "w"},
                                "data_sources": {"s": {"File": {"path": "./in",
                                                                "primary_key": ["id"]}}},
                                "pipelines": {"p": {"data_source": "data_sources.s"}}}
    assert Config.load(path).get_pipeline("p").name == "p"


def test_discover_finds_skippr_yml_then_skippr_yaml_else_an_empty_config(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    empty = Config.discover()
    assert empty.path == "skippr.yml" and not (tmp_path / "skippr.yml").exists()
    write(tmp_path / "skippr.yaml", "data_sources: {from_yaml: {Sample: {}}}\n")
    assert Config.discover().get_data_source("from_yaml").name == "from_yaml"
    write(tmp_path / "skippr.yml", "data_sources: {from_yml: {Sample: {}}}\n")
    assert Config.discover().path == "skippr.yml"
    empty.workspace("w").save()
    assert parsed(read(tmp_path / "skippr.yml"))["skippr"] == {"workspace": "w"}


def test_load_refuses_a_missing_file_and_one_the_engine_refuses(tmp_path):
    with pytest.raises(FileNotFoundError):
        Config.load(tmp_path / "skippr.yml")
    path = write(tmp_path / "skippr.yml", "data_sources:\n  s:\n    File: {format: xml}\n")
    with pytest.raises(skippr.ConfigError) as refused:
        Config.load(path)
    assert isinstance(refused.value, ValueError)
    assert f"{path}:3:5: data_sources.s.File: File needs 'path'" in str(refused.value)


def test_references_stay_unresolved(tmp_path, monkeypatch):
    monkeypatch.setenv("PG_PASSWORD", "hunter2")
    cfg = Config()
    cfg.data_source("pg", DataSourcePostgres(database="shop", password=EnvRef("PG_PASSWORD"),
                                             port=EnvRef("PG_PORT")))
    cfg.save(tmp_path / "skippr.yml")
    saved = read(tmp_path / "skippr.yml")
    assert "hunter2" not in saved
    assert parsed(saved)["data_sources"]["pg"]["Postgres"] == {
        "port": "${PG_PORT}", "password": "${PG_PASSWORD}", "database": "shop"}


# ----- connector classes --------------------------------------------------------------------------

def test_one_class_per_registry_entry_named_by_role_and_kind():
    names = {("DataSource" if spec["role"] == "source" else "DataSink") + spec["kind"]
             for spec in _engine.connector_specs()}
    assert set(CONNECTOR_CLASSES) == names
    assert {"DataSourceFile", "DataSourceSample", "DataSourcePostgres", "DataSourceS3",
            "DataSinkSkipprLake", "DataSinkDuckdb", "DataSinkPostgres"} <= names


def test_a_missing_required_setting_is_a_type_error():
    with pytest.raises(TypeError, match=r"DataSourceS3.__init__\(\) missing 2 required "
                                        r"keyword-only arguments: 's3_bucket' and 's3_prefix'"):
        DataSourceS3()


def test_an_unknown_setting_is_a_type_error():
    with pytest.raises(TypeError, match=r"got an unexpected keyword argument 'pth'"):
        DataSourceFile(path="x", pth="y")
    with pytest.raises(TypeError):
        DataSourceFile("x")  # keyword-only


def test_values_are_checked_by_the_engine_with_the_clis_words():
    with pytest.raises(ValueError) as bad_choice:
        DataSourceFile(path="x", format="xml")
    assert str(bad_choice.value) == (
        "DataSourceFile: format: 'xml' is not allowed; choose one of: json, csv, parquet")
    with pytest.raises(ValueError) as out_of_range:
        DataSinkPostgres(user="u", database="d", port=70000)
    assert str(out_of_range.value) == (
        "DataSinkPostgres: port: 70000 is out of range; allowed: 1 to 65535")
    with pytest.raises(ValueError, match="DataSinkDuckdb: warehouse 'lake' must be an absolute"):
        DataSinkDuckdb(warehouse="lake")
    with pytest.raises(ValueError) as empty_name:
        DataSourceFile(path="x", primary_key=[""])
    assert str(empty_name.value) == "DataSourceFile: primary_key[0]: must not be empty"


def test_types_are_checked():
    with pytest.raises(TypeError, match="rows must be an int"):
        DataSourceSample(rows=True)
    with pytest.raises(TypeError, match="rows must be an int"):
        DataSourceSample(rows="10")
    with pytest.raises(TypeError, match="primary_key must be a list of str"):
        DataSourceFile(path="x", primary_key="id")
    with pytest.raises(TypeError, match="path must be a str"):
        DataSourceFile(path=pathlib.Path("x"))


def test_a_secret_takes_only_an_env_ref():
    with pytest.raises(TypeError, match=r'refuses plaintext; pass EnvRef\("POSTGRES_PASSWORD"\)'):
        DataSourcePostgres(database="d", password="hunter2")
    source = DataSourcePostgres(database="d", password=EnvRef("PG_PASSWORD"))
    assert source.password == EnvRef("PG_PASSWORD")


def test_an_env_ref_may_stand_for_any_single_value():
    source = DataSourcePostgres(database="d", port=EnvRef("PG_PORT"), cdc_mode=EnvRef("MODE"))
    assert source.explicit_settings() == {"port": EnvRef("PG_PORT"), "database": "d",
                                          "cdc_mode": EnvRef("MODE")}
    with pytest.raises(TypeError):
        DataSourcePostgres(database="d", tables=EnvRef("TABLES"))


def test_instances_expose_settings_with_defaults_and_are_immutable():
    sample = DataSourceSample(rows=10)
    assert (sample.rows, sample.seed, sample.version) == (10, 42, None)
    assert sample.explicit_settings() == {"rows": 10}
    assert sample == DataSourceSample(rows=10) and sample != DataSourceSample(rows=11)
    with pytest.raises(AttributeError):
        sample.rows = 5


def test_env_ref_names_follow_the_engines_grammar():
    assert str(EnvRef("_PG_password9")) == "${_PG_password9}"
    for bad in ["", "1BAD", "A-B", "A B", "${A}"]:
        with pytest.raises(ValueError, match="not a variable name"):
            EnvRef(bad)
    with pytest.raises(TypeError):
        EnvRef(1)


def test_stub_file_is_what_the_generator_writes():
    spec = importlib.util.spec_from_file_location(
        "gen_connector_stubs", REPO / "python" / "tools" / "gen_connector_stubs.py")
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    stub = (REPO / "python" / "skippr" / "connectors.pyi").read_text()
    assert stub == generator.render_stubs(_engine.connector_specs()), (
        "run: PYTHONPATH=build/python /usr/bin/python3 python/tools/gen_connector_stubs.py")


# ----- pipelines, transforms, aggregates ----------------------------------------------------------

def test_an_aggregate_measure_is_exactly_one_of_sum_or_count():
    for arguments in [{}, {"sum": "a", "count": "*"}]:
        with pytest.raises(ValueError, match="exactly one of sum"):
            AggregateMeasure(**arguments)
    with pytest.raises(ValueError, match=r"AggregateMeasure: sum: sum needs a field name"):
        AggregateMeasure(sum="*")


def test_aggregates_and_transforms_are_checked_by_the_engine():
    total = AggregateMeasure(sum="amount")
    with pytest.raises(ValueError, match="TransformAggregate: measures: needs at least one"):
        TransformAggregate(id="totals", key_fields=["customer_id"], measures={})
    with pytest.raises(ValueError, match="TransformAggregate: id: id 'bad id' must be letters"):
        TransformAggregate(id="bad id", key_fields=["k"], measures={"total": total})
    aggregate = TransformAggregate(id="totals", key_fields=["k"], measures={"total": total})
    with pytest.raises(ValueError, match="Transform: aggregates: type: copy cannot set aggregates"):
        Transform(type="copy", aggregates=[aggregate])
    with pytest.raises(ValueError, match=r"^Transform: ops\[0\]\.explode: unknown key 'explode'; "
                                         r"allowed here: rename"):
        Transform(ops=[{"explode": ["a"]}])
    with pytest.raises(TypeError, match="aggregates"):
        Transform(aggregates=[{"id": "totals"}])


def test_pipeline_settings_are_checked_at_construction(commented_file):
    cfg = Config.load(commented_file)
    source = cfg.get_data_source("pg")
    with pytest.raises(ValueError, match="Pipeline: sync_frequency_seconds: 0 is out of range"):
        Pipeline(data_source=source, sync_frequency_seconds=0)
    with pytest.raises(ValueError, match="Pipeline: disk_resume_at_percent: must be below"):
        Pipeline(data_source=source, disk_pause_at_percent=50, disk_resume_at_percent=60)
    with pytest.raises(TypeError, match="data_source must be a DataSourceRef"):
        Pipeline(data_source=cfg.get_data_sink("lake"))
    with pytest.raises(TypeError, match="deadletter_sink must be a DeadletterSinkRef"):
        Pipeline(data_source=source, deadletter_sink=cfg.get_data_sink("lake"))
    with pytest.raises(TypeError):
        Pipeline(data_source="data_sources.pg")
    with pytest.raises(TypeError, match="chaos_mode must be a bool"):
        Pipeline(data_source=source, chaos_mode="yes")


def test_pipeline_names_follow_the_engines_rule():
    cfg = Config()
    source = cfg.data_source("s", DataSourceSample())
    with pytest.raises(ValueError, match=r"^Invalid pipeline name '\.\./up'"):
        cfg.pipeline("../up", Pipeline(data_source=source))
    with pytest.raises(ValueError, match="reserved"):
        cfg.pipeline("wal", Pipeline(data_source=source))


# ----- registration, refs and getters -------------------------------------------------------------

def test_registration_returns_refs_bound_to_the_config():
    cfg = Config()
    source = cfg.data_source("s", DataSourceSample())
    sink = cfg.data_sink("lake", DataSinkSkipprLake(warehouse="file:///srv/lake"))
    errors = cfg.deadletter_sink("errors", DataSinkSkipprLake(warehouse="file:///srv/errors"))
    pipeline = cfg.pipeline("p", Pipeline(data_source=source, data_sink=sink,
                                          deadletter_sink=errors))
    assert (type(source), type(sink), type(errors), type(pipeline)) == (
        DataSourceRef, DataSinkRef, DeadletterSinkRef, PipelineRef)
    assert (pipeline.name, pipeline.config) == ("p", cfg)
    assert pipeline == cfg.get_pipeline("p") and source == cfg.get_data_source("s")
    assert parsed(cfg.to_yaml())["pipelines"]["p"] == {
        "data_source": "data_sources.s", "data_sink": "data_sinks.lake",
        "deadletter_sink": "deadletter_sinks.errors"}


def test_refs_from_another_config_are_refused():
    first, second = Config(), Config()
    source = first.data_source("s", DataSourceSample())
    second.data_source("s", DataSourceSample())
    with pytest.raises(ValueError, match=r"data_sources\.s belongs to a different Config"):
        second.pipeline("p", Pipeline(data_source=source))


def test_getters_raise_key_error_for_what_is_not_defined(commented_file):
    cfg = Config.load(commented_file)
    assert cfg.get_data_sink("files_lake").name == "files_lake"
    assert cfg.get_pipeline("files").config is cfg
    for getter in [cfg.get_data_source, cfg.get_data_sink, cfg.get_deadletter_sink,
                   cfg.get_pipeline]:
        with pytest.raises(KeyError):
            getter("absent")


def test_registration_checks_names_and_connector_roles():
    cfg = Config()
    for bad_name in ["", "a.b"]:
        with pytest.raises(ValueError):
            cfg.data_source(bad_name, DataSourceSample())
    with pytest.raises(TypeError, match="needs a DataSourceConfig"):
        cfg.data_source("s", DataSinkDuckdb(warehouse="file:///srv/duck"))
    with pytest.raises(TypeError, match="needs a DataSinkConfig"):
        cfg.deadletter_sink("d", DataSourceSample())


def test_only_passed_settings_are_written():
    cfg = Config()
    cfg.data_sink("lake", DataSinkSkipprLake(warehouse="file:///srv/lake"))
    assert parsed(cfg.to_yaml()) == {
        "data_sinks": {"lake": {"SkipprLake": {"warehouse": "file:///srv/lake"}}}}


# ----- the CLI reads what Python writes -----------------------------------------------------------

def skipprd_binary() -> pathlib.Path:
    return pathlib.Path(os.environ.get("SKIPPRD", REPO / "build" / "src" / "skipprd"))


@pytest.mark.skipif(not skipprd_binary().exists(), reason="skipprd is not built")
def test_skipprd_doctor_passes_on_a_saved_file(tmp_path):
    cfg = Config()
    source = cfg.data_source("sample", DataSourceSample(rows=10))
    lake = cfg.data_sink("lake", DataSinkSkipprLake(warehouse=f"file://{tmp_path}/lake"))
    cfg.pipeline("demo", Pipeline(data_source=source, data_sink=lake,
                                  data_dir=str(tmp_path / "data")))
    path = tmp_path / "skippr.yml"
    cfg.save(path)
    doctor = subprocess.run([str(skipprd_binary()), "doctor", "--config", str(path)],
                            cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    assert "All checks passed." in doctor.stdout


def test_a_file_that_is_not_utf8_is_a_config_error_at_its_place(tmp_path):
    path = tmp_path / "skippr.yml"
    path.write_bytes(b"data_sources:\n  s:\n    Sample: {rows: \xff}\n")
    with pytest.raises(skippr.ConfigError, match=r"skippr.yml:3:20: byte 0xff is not UTF-8 text"):
        Config.load(path)
