//! Real Hermes for integration tests: `hermes acp` from a local venv, pointed at the scripted fake
//! LLM in `tests/hermes/fake_llm.py`, both inside a fresh loopback-only network namespace.
//!
//! Standalone on purpose (only `serde_json`, `tempfile`, `iris_acp` and `sandbox.rs` next to it), so any test file can use
//! it with `#[path = "common/hermes.rs"] mod hermes;`.
//!
//! Hermes is found in `$IRIS_HERMES_VENV`, else `<workspace>/.venv`, else
//! `/opt/iris-hermes-venv` (`python3 -m venv V && V/bin/pip install 'hermes-agent[acp]==0.19.0'`).
//! The build script (`build.rs`) looks in the same places: without one, the tests that need
//! Hermes are ignored (a cfg `lacks_hermes_*`), except under CI (`$CI` set), where they run and a
//! missing Hermes is a failure. [`HermesEnv::new`] fails a test that runs without it.
//!
//! [`HermesEnv::command`] is a self-contained command line: a launcher script that enters a new
//! network namespace, brings up `lo`, starts the fake LLM in the background, waits until it
//! listens, then `exec`s Hermes with a scrubbed environment (`HOME`, `HERMES_HOME` in the temp
//! dir). The fake LLM stays in the launcher's process group, so killing the agent's group (which
//! the ACP crate does) kills it too; it also exits on its own when Hermes goes away.
#![allow(dead_code)]

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;
use tempfile::TempDir;

#[path = "sandbox.rs"]
mod sandbox;
use sandbox::{
    is_root, namespace_support, shell_quote, unavailable, wait_until_ready, SYSTEM_PATH,
};

/// The fake LLM's port. Every spawn gets a new network namespace, so the port is always free and
/// parallel tests cannot collide.
pub const FAKE_LLM_PORT: u16 = 8765;
/// Context window the config and the fake LLM both announce.
pub const CONTEXT_LENGTH: u64 = 65536;
/// The model Hermes starts with, as `session/new` reports it.
pub const MODEL_ID: &str = "custom:fake-model";
/// A second model the fake LLM lists, for `session/set_model`.
pub const OTHER_MODEL_ID: &str = "custom:fake-model-2";

const FAKE_LLM: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/hermes/fake_llm.py");
const WORKSPACE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
const SYSTEM_VENV: &str = "/opt/iris-hermes-venv";

/// One Hermes installation plus a private HOME, HERMES_HOME, working directory and fake-LLM
/// script. Each [`HermesEnv::command`] run starts a fresh Hermes and fake LLM over the same files,
/// so a respawned Hermes sees the sessions its predecessor saved.
pub struct HermesEnv {
    /// Root of everything this environment writes; removed on drop.
    pub home: TempDir,
    /// The venv Hermes runs from.
    pub venv: PathBuf,
    /// `HERMES_HOME` (config.yaml, sessions database, logs).
    pub hermes_home: PathBuf,
    /// `HOME` for Hermes.
    pub user_home: PathBuf,
    /// A directory to use as the session cwd.
    pub work: PathBuf,
    script: PathBuf,
    log: PathBuf,
    launcher: PathBuf,
    fake_stderr: PathBuf,
}

impl HermesEnv {
    /// Prepares an environment whose fake LLM answers from `script` (see `fake_llm.py` for the
    /// rule format). Panics, saying what is missing, without a Hermes venv or network namespaces.
    pub fn new(script: &Value) -> HermesEnv {
        let Some(venv) = find_venv() else {
            unavailable(
                "Hermes venv not found; set IRIS_HERMES_VENV to a venv with \
                 `pip install 'hermes-agent[acp]==0.19.0'`, or create <workspace>/.venv",
            );
        };
        if let Err(why) = namespace_support() {
            unavailable(&format!(
                "cannot create a network namespace for Hermes: {why}"
            ));
        }

        let home = tempfile::Builder::new()
            .prefix("iris-hermes-")
            .tempdir()
            .expect("temp dir for Hermes");
        let root = home.path().to_path_buf();
        let hermes_home = root.join("hermes-home");
        let user_home = root.join("home");
        let work = root.join("work");
        for dir in [&hermes_home, &user_home, &work] {
            fs::create_dir_all(dir).expect("create Hermes test dirs");
        }
        let env = HermesEnv {
            venv,
            hermes_home,
            user_home,
            work,
            script: root.join("script.json"),
            log: root.join("llm-requests.jsonl"),
            launcher: root.join("launch.sh"),
            fake_stderr: root.join("fake-llm.stderr"),
            home,
        };
        env.set_script(script);
        fs::write(env.hermes_home.join("config.yaml"), config_yaml()).expect("write config.yaml");
        env.write_launchers();
        env
    }

    /// The agent command line as program + arguments: `["sh", "<tmp>/launch.sh"]`.
    pub fn command(&self) -> Vec<String> {
        vec!["sh".into(), self.launcher.to_string_lossy().into_owned()]
    }

    /// The same command as one line, for configurations that take a command string.
    pub fn command_line(&self) -> String {
        self.command()
            .iter()
            .map(|word| shell_quote(word))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// An [`iris_acp::AgentSpec`] running [`HermesEnv::command`] in the work directory.
    pub fn spec(&self) -> iris_acp::AgentSpec {
        let command = self.command();
        let mut spec = iris_acp::AgentSpec::new(command[0].clone()).cwd(&self.work);
        for arg in &command[1..] {
            spec = spec.arg(arg.clone());
        }
        spec
    }

    /// Replaces the fake LLM's script; it is re-read on the next request.
    pub fn set_script(&self, script: &Value) {
        // Written whole then renamed, so the fake LLM never reads half a file.
        let tmp = self.script.with_extension("json.tmp");
        fs::write(
            &tmp,
            serde_json::to_vec_pretty(script).expect("script serializes"),
        )
        .expect("write fake LLM script");
        fs::rename(&tmp, &self.script).expect("install fake LLM script");
    }

    /// Every request the fake LLM received so far (across respawns), one JSON object each, plus
    /// its event lines (`{"event": "client disconnected mid-stream", …}`).
    pub fn requests(&self) -> Vec<Value> {
        let Ok(text) = fs::read_to_string(&self.log) else {
            return Vec::new();
        };
        // A line still being written is incomplete; it is skipped rather than failing the test.
        text.lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect()
    }

    /// Only the `POST /v1/chat/completions` requests (turns and side calls).
    pub fn chat_requests(&self) -> Vec<Value> {
        self.requests()
            .into_iter()
            .filter(|r| r["method"] == "POST" && r["path"] == "/v1/chat/completions")
            .collect()
    }

    /// Only the requests of agent turns (streamed, with tools), not titles or other side calls.
    pub fn turn_requests(&self) -> Vec<Value> {
        self.chat_requests()
            .into_iter()
            .filter(|r| r["kind"] == "turn")
            .collect()
    }

    /// The fake LLM's stderr (access log and tracebacks), for failure messages.
    pub fn fake_llm_stderr(&self) -> String {
        fs::read_to_string(&self.fake_stderr).unwrap_or_default()
    }

    /// Hermes' own log files under `HERMES_HOME`, concatenated, for failure messages.
    pub fn hermes_logs(&self) -> String {
        let mut out = String::new();
        if let Ok(dir) = fs::read_dir(self.hermes_home.join("logs")) {
            for entry in dir.flatten() {
                if let Ok(text) = fs::read_to_string(entry.path()) {
                    out.push_str(&text);
                }
            }
        }
        out
    }

    fn write_launchers(&self) {
        let root = self.home.path();
        let inner = root.join("inner.sh");
        let ready = root.join("fake-llm.ready");
        let python = self.venv.join("bin/python3");
        let hermes = self.venv.join("bin/hermes");
        let q = |p: &Path| shell_quote(&p.to_string_lossy());

        // Runs inside the namespace. The fake LLM gets no stdio of ours: it must not write to
        // the ACP stdout, and must not keep the agent's pipes open after Hermes exits.
        let inner_script = format!(
            r#"#!/bin/sh
# Inside a fresh network namespace: loopback only.
set -e
PATH={system_path}
export PATH
ip link set lo up
rm -f {ready}
{python} {fake_llm} --port {port} --script {script} --log {log} --ready-file {ready} \
    --parent-pid $$ </dev/null >/dev/null 2>>{fake_stderr} &
{wait}
cd {work}
# A scrubbed environment: no proxies, API keys or HERMES_* settings leak in from the caller.
exec env -i PATH={venv_bin}:{system_path} HOME={user_home} HERMES_HOME={hermes_home} \
    LANG=C.UTF-8 LC_ALL=C.UTF-8 TERM=dumb {hermes} acp
"#,
            system_path = SYSTEM_PATH,
            wait = wait_until_ready(
                &q(&ready),
                &format!("fake LLM (see {})", self.fake_stderr.display()),
            ),
            ready = q(&ready),
            python = q(&python),
            fake_llm = q(Path::new(FAKE_LLM)),
            port = FAKE_LLM_PORT,
            script = q(&self.script),
            log = q(&self.log),
            fake_stderr = q(&self.fake_stderr),
            work = q(&self.work),
            venv_bin = q(&self.venv.join("bin")),
            user_home = q(&self.user_home),
            hermes_home = q(&self.hermes_home),
            hermes = q(&hermes),
        );
        fs::write(&inner, inner_script).expect("write inner launcher");

        // `unshare` execs its command, so the launcher's pid (the agent process group) carries
        // through to Hermes itself.
        let unshare = if is_root() {
            "unshare -n"
        } else {
            "unshare -r -n"
        };
        let outer = format!(
            "#!/bin/sh\n\
             # Hermes and its fake LLM in a new network namespace, so nothing they do leaves\n\
             # this machine and the fixed fake-LLM port is always free.\n\
             PATH={SYSTEM_PATH}:$PATH\n\
             export PATH\n\
             exec {unshare} sh {inner}\n",
            inner = q(&inner),
        );
        fs::write(&self.launcher, outer).expect("write launcher");
    }
}

/// `$HERMES_HOME/config.yaml`: everything that would reach a public host is off, the model is the
/// fake LLM, and risky commands ask the client (`approvals: manual`).
fn config_yaml() -> String {
    format!(
        "model: {{provider: custom, base_url: \"http://127.0.0.1:{FAKE_LLM_PORT}/v1\", \
         default: fake-model, context_length: {CONTEXT_LENGTH}}}\n\
         model_catalog: {{enabled: false}}\n\
         security: {{tirith_enabled: false}}\n\
         approvals: {{mode: manual}}\n\
         skills: {{creation_nudge_interval: 0}}\n\
         memory: {{nudge_interval: 0}}\n"
    )
}

fn has_hermes(venv: &Path) -> bool {
    venv.join("bin/hermes").is_file() && venv.join("bin/python3").exists()
}

fn find_venv() -> Option<PathBuf> {
    if let Some(explicit) = std::env::var_os("IRIS_HERMES_VENV").filter(|v| !v.is_empty()) {
        let venv = PathBuf::from(explicit);
        // An explicit setting that points nowhere is a mistake, not a reason to skip.
        assert!(
            has_hermes(&venv),
            "IRIS_HERMES_VENV={} has no bin/hermes and bin/python3",
            venv.display()
        );
        return Some(venv);
    }
    let local = Path::new(WORKSPACE).join(".venv");
    if has_hermes(&local) {
        return Some(local.canonicalize().unwrap_or(local));
    }
    let system = PathBuf::from(SYSTEM_VENV);
    has_hermes(&system).then_some(system)
}
