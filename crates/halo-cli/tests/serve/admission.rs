//! Admission: a request the model has no room for is refused before its body is held; gRPC places held by messages as they arrive; clients that stop mid-request give their places back.

use super::*;

#[test]
fn a_request_the_model_has_no_room_for_is_refused_without_its_body_being_held() {
    use std::io::{Read, Write};
    let served = Served::start("tiny_add.vmfb", "tiny_add", &["--max-concurrency=1", "--max-queue=0"]);
    // A request whose body is still arriving holds the model's one place.
    let uploading = partial_request(&served, 1000, 10);
    let in_flight = || {
        let text = served
            .agent
            .get(&format!("{}/metrics", served.base))
            .call()
            .expect("metrics");
        let text = text.into_body().read_to_string().expect("text");
        sample(&text, "halo_inference_requests_in_flight{model=\"tiny_add\"}")
    };
    let started = std::time::Instant::now();
    while in_flight() != Some(1.0) {
        assert!(started.elapsed().as_secs() < 30, "the first request never arrived");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    // The next sends 48 MiB, which the server reads and drops as they arrive, then answers 503.
    let before = peak_rss_kib(served.child.id());
    const BODY: usize = 48 << 20;
    let mut refused = partial_request(&served, BODY, 0);
    let mut reader = refused.try_clone().expect("a second handle");
    let sender = std::thread::spawn(move || {
        let chunk = vec![b' '; 1 << 20];
        (0..BODY / chunk.len()).all(|_| refused.write_all(&chunk).is_ok())
    });
    reader
        .set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .expect("a timeout");
    let mut answer = vec![0; 4096];
    let read = reader.read(&mut answer).expect("an answer");
    let answer = String::from_utf8_lossy(&answer[..read]);
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(answer.contains("model 'tiny_add' is busy"), "{answer}");
    assert!(sender.join().expect("the sender"), "the whole body was taken");
    let grew = peak_rss_kib(served.child.id()).saturating_sub(before);
    assert!(
        grew < 16 << 10,
        "the server's peak memory grew {grew} KiB for a refused body"
    );
    // The upload given up, its place is free again.
    drop(uploading);
    let body = json!({"inputs": [
        {"name": "input0", "shape": [4], "datatype": "FP32", "data": [1, 2, 3, 4]},
        {"name": "input1", "shape": [4], "datatype": "FP32", "data": [1, 1, 1, 1]},
    ]});
    let started = std::time::Instant::now();
    loop {
        let (status, response) = served.post("/v2/models/tiny_add/infer", &body.to_string());
        if status == 200 {
            break;
        }
        assert_eq!(status, 503, "{response}");
        assert!(started.elapsed().as_secs() < 30, "the place never came free");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// Over gRPC, places go to messages as they arrive: two unary calls stopped in the middle of
/// their messages hold both places of a model admitting two, so a third call is refused before
/// its message is read, and a stream whose next message finds no place ends `UNAVAILABLE`. Once
/// they have gone, a message is read again (a damaged one is then `INVALID_ARGUMENT`).
#[test]
fn grpc_places_are_held_by_messages_as_they_arrive() {
    let served = Served::start(
        "tiny_add.vmfb",
        "tiny_add",
        &["--max-concurrency=1", "--max-queue=1", "--body-pause-ms=0"],
    );
    // A 100-byte message of which 6 bytes came, and a whole 3-byte message that is not protobuf.
    let part = [&[0u8, 0, 0, 0, 100][..], b"\x0a\x04tiny"].concat();
    let damaged = [0u8, 0, 0, 0, 3, 0xff, 0xff, 0xff];
    let holders: Vec<_> = (0..2)
        .map(|_| {
            let (grpc, part) = (served.grpc.clone(), part.clone());
            std::thread::spawn(move || {
                raw_grpc_call(&grpc, "ModelInfer", &part, BodyEnd::StaysOpen, Duration::from_secs(3))
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let wait = Duration::from_secs(20);
    let refused = raw_grpc_call(&served.grpc, "ModelInfer", &damaged, BodyEnd::Ends, wait);
    let stream_refused = raw_grpc_call(&served.grpc, "ModelStreamInfer", &part, BodyEnd::StaysOpen, wait);
    let held: Vec<_> = holders.into_iter().map(|h| h.join().expect("a holder")).collect();
    let read = raw_grpc_call(&served.grpc, "ModelInfer", &damaged, BodyEnd::Ends, wait);
    assert_eq!(held, [None, None], "the calls stopped mid-message were answered");
    for (what, ended) in [("a call", &refused), ("a stream's message", &stream_refused)] {
        let (status, message) = ended.clone().unwrap_or_else(|| panic!("{what} was never answered"));
        assert_eq!(status, "14", "{what}: UNAVAILABLE, not {status} {message}");
        assert!(message.contains("the server is busy"), "{what}: {message}");
    }
    let (status, message) = read.expect("an answer once the places are free");
    assert_eq!(status, "3", "INVALID_ARGUMENT, not {status} {message}");
}

/// Open `ModelStreamInfer` streams have a limit of their own (`--max-grpc-streams`): past it a
/// stream is refused `UNAVAILABLE`, while unary calls are still read and answered.
#[test]
fn grpc_streams_past_their_limit_are_refused_and_calls_go_on() {
    let served = Served::start("tiny_add.vmfb", "tiny_add", &["--max-grpc-streams=2"]);
    let idle: Vec<_> = (0..2)
        .map(|_| {
            let grpc = served.grpc.clone();
            std::thread::spawn(move || {
                raw_grpc_call(
                    &grpc,
                    "ModelStreamInfer",
                    &[],
                    BodyEnd::StaysOpen,
                    Duration::from_secs(3),
                )
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let wait = Duration::from_secs(20);
    let third = raw_grpc_call(&served.grpc, "ModelStreamInfer", &[], BodyEnd::StaysOpen, wait);
    let damaged = [0u8, 0, 0, 0, 3, 0xff, 0xff, 0xff];
    let call = raw_grpc_call(&served.grpc, "ModelInfer", &damaged, BodyEnd::Ends, wait);
    let idle: Vec<_> = idle.into_iter().map(|h| h.join().expect("an idle stream")).collect();
    assert_eq!(idle, [None, None], "an idle stream was ended");
    let (status, message) = third.expect("the third stream is answered");
    assert_eq!(status, "14", "UNAVAILABLE, not {status} {message}");
    assert!(message.contains("2 gRPC streams are open"), "{message}");
    let (status, message) = call.expect("the call is answered");
    assert_eq!(
        status, "3",
        "the call's message is read: INVALID_ARGUMENT, not {status} {message}"
    );
}

/// A client that sends part of an inference request and then nothing gives its place back once
/// its pause passes `--body-pause-ms`: over HTTP its request is answered `504` naming the bytes
/// it had, over gRPC `DEADLINE_EXCEEDED` (a unary call's message, or one message of a stream;
/// between messages a stream may pause). Before, three such clients held every place of a model
/// for as long as they kept their connections, and every other client was refused as busy.
#[test]
fn clients_that_stop_mid_request_give_their_places_back_after_the_pause_limit() {
    use std::io::{Read, Write};
    let served = Served::start(
        "tiny_add.vmfb",
        "tiny_add",
        &["--max-concurrency=1", "--max-queue=2", "--body-pause-ms=300"],
    );
    let address = served.base.trim_start_matches("http://").to_string();
    let partial = || {
        let mut stream = std::net::TcpStream::connect(&address).expect("a connection");
        let head = "POST /v2/models/tiny_add/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
                    Content-Length: 1000\r\n\r\n{\"inputs\"";
        stream.write_all(head.as_bytes()).expect("the request's start");
        stream
    };
    let add = json!({"inputs": [
        {"name": "input0", "shape": [4], "datatype": "FP32", "data": [1, 2, 3, 4]},
        {"name": "input1", "shape": [4], "datatype": "FP32", "data": [10, 20, 30, 40]},
    ]})
    .to_string();
    // And one that sends part of a request's head.
    let mut head_only = std::net::TcpStream::connect(&address).expect("a connection");
    head_only
        .write_all(b"POST /v2/models/tiny_add/infer HTTP/1.1\r\nHo")
        .expect("part of a head");
    let held: Vec<_> = (0..3).map(|_| partial()).collect();
    std::thread::sleep(Duration::from_millis(50));
    let (busy, _) = served.post("/v2/models/tiny_add/infer", &add);
    let answers: Vec<String> = held
        .into_iter()
        .map(|mut stream| {
            stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
            let mut answer = String::new();
            let _ = stream.read_to_string(&mut answer);
            answer
        })
        .collect();
    head_only.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let closed = head_only.read(&mut [0; 64]);
    let (status, answer) = served.post("/v2/models/tiny_add/infer", &add);
    assert!(
        matches!(closed, Ok(0)),
        "the connection with part of a head was not closed: {closed:?}"
    );
    assert_eq!(
        busy, 503,
        "three clients in the middle of a request fill the model's places"
    );
    for answer in &answers {
        assert!(
            answer.starts_with("HTTP/1.1 504")
                && answer.contains("the request body stalled: no bytes arrived for 300ms after the first 9 bytes"),
            "{answer}"
        );
    }
    assert_eq!(
        (status, json_f32(&answer["outputs"][0]["data"])),
        (200, vec![11.0, 22.0, 33.0, 44.0])
    );

    // A 100-byte message of which 6 bytes came.
    let part = [&[0u8, 0, 0, 0, 100][..], b"\x0a\x04tiny"].concat();
    let wait = Duration::from_secs(20);
    for method in ["ModelInfer", "ModelStreamInfer"] {
        let ended = raw_grpc_call(&served.grpc, method, &part, BodyEnd::StaysOpen, wait);
        let (status, message) = ended.unwrap_or_else(|| panic!("{method}: the paused call was never ended"));
        assert_eq!(status, "4", "{method}: DEADLINE_EXCEEDED, not {status} {message}");
        assert!(message.contains("stalled"), "{method}: {message}");
        // The same part with the body ended there is the client's error.
        let ended = raw_grpc_call(&served.grpc, method, &part, BodyEnd::Ends, wait);
        let (status, message) = ended.unwrap_or_else(|| panic!("{method}: the cut call was never ended"));
        assert_eq!(status, "3", "{method}: INVALID_ARGUMENT, not {status} {message}");
        assert!(
            message.contains("ended in the middle of a message"),
            "{method}: {message}"
        );
    }
    // Connections to the gRPC port that send nothing, or part of HTTP/2's preface, are closed.
    for sent in [&b""[..], b"PRI * HTTP/2.0\r\n"] {
        let mut silent = std::net::TcpStream::connect(&served.grpc).expect("a connection");
        silent.write_all(sent).expect("the bytes");
        silent.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut answer = Vec::new();
        let closed = silent.read_to_end(&mut answer);
        assert!(
            closed.is_ok(),
            "a gRPC connection that sent {sent:?} was not closed: {closed:?}"
        );
    }
    let between_messages = raw_grpc_call(
        &served.grpc,
        "ModelStreamInfer",
        &[],
        BodyEnd::StaysOpen,
        Duration::from_secs(1),
    );
    assert_eq!(between_messages, None, "a stream pausing between messages was ended");
}
