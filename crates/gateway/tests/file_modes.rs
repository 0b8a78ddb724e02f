//! Files of the data dir are the owner's alone, whatever the umask the gateway starts with.
//! (Its own test binary: the umask is process-wide.)

mod common;

use common::file_mode as mode;
use common::*;

#[tokio::test]
async fn the_data_dir_and_its_files_are_private_under_a_permissive_umask() {
    // SAFETY: umask only swaps the process's file creation mask; no other test runs in this
    // binary.
    let old = unsafe { libc::umask(0o000) };
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("fresh").join("data");
    let data = dir.clone();
    // The generated token file, not a configured token.
    let gw = TestGateway::start_in(&dir, |c| c.token = None).await;
    let token = std::fs::read_to_string(data.join("token")).expect("token file");
    let mut conn = iris_client::RawConnection::connect(&gw.url)
        .await
        .expect("connect");
    conn.hello(token.trim(), "phone").await.expect("hello");
    conn.close().await.expect("close");
    assert_eq!(mode(&data), 0o700, "data dir");
    assert_eq!(mode(&data.join("token")), 0o600, "token");
    assert_eq!(mode(&data.join("iris.db")), 0o600, "database");
    assert_eq!(mode(&data.join("iris.db-wal")), 0o600, "WAL");
    gw.stop().await;
    // SAFETY: as above.
    unsafe { libc::umask(old) };
}
