//! JSON-RPC 2.0 envelopes: classify an incoming line, build responses.
//!
//! Classification never trusts the input: every field is checked for type, and
//! anything that is not a well-formed request or notification becomes an
//! [`Incoming::Invalid`] answered with the error code the JSON-RPC spec names.

use serde_json::{Map, Value, json};

/// Invalid JSON was received.
pub const PARSE_ERROR: i64 = -32700;
/// The JSON sent is not a valid request object.
pub const INVALID_REQUEST: i64 = -32600;
/// The method does not exist or is not available.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// Invalid method parameters.
pub const INVALID_PARAMS: i64 = -32602;
/// Internal JSON-RPC error.
pub const INTERNAL_ERROR: i64 = -32603;
/// MCP 2026-07-28: the request's protocol version is not supported.
pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;

/// One classified incoming line.
#[derive(Debug, PartialEq)]
pub enum Incoming {
    /// A request: it gets exactly one response (unless the client cancels it).
    Request {
        /// The id, echoed unchanged (a string or a number).
        id: Value,
        /// The method name.
        method: String,
        /// The params object (`{}` when absent).
        params: Map<String, Value>,
    },
    /// A notification: never answered.
    Notification {
        /// The method name.
        method: String,
        /// The params object (`{}` when absent).
        params: Map<String, Value>,
    },
    /// A response from the client to a request we sent (`roots/list`).
    Response {
        /// The id we used.
        id: Value,
        /// The result, when it succeeded.
        result: Option<Value>,
    },
    /// Not a valid message: answer with this error.
    Invalid {
        /// The request id if one could be read, else `null`.
        id: Value,
        /// JSON-RPC error code.
        code: i64,
        /// What was wrong.
        message: String,
    },
}

/// Classifies one line of input.
pub fn classify(line: &[u8]) -> Incoming {
    let value: Value = match serde_json::from_slice(line) {
        Ok(value) => value,
        Err(e) => {
            return Incoming::Invalid {
                id: Value::Null,
                code: PARSE_ERROR,
                message: format!("Parse error: {e}"),
            };
        }
    };
    classify_value(value)
}

fn invalid(id: Value, message: impl Into<String>) -> Incoming {
    Incoming::Invalid {
        id,
        code: INVALID_REQUEST,
        message: format!("Invalid Request: {}", message.into()),
    }
}

/// Classifies a parsed JSON value.
pub fn classify_value(value: Value) -> Incoming {
    let mut object = match value {
        Value::Object(object) => object,
        Value::Array(_) => return invalid(Value::Null, "batch requests are not supported"),
        _ => return invalid(Value::Null, "a message must be a JSON object"),
    };
    // A usable id is echoed even when the rest of the message is invalid.
    let id = match object.remove("id") {
        None => None,
        Some(id @ (Value::String(_) | Value::Number(_))) => Some(id),
        Some(_) => return invalid(Value::Null, "id must be a string or a number"),
    };
    let echo = id.clone().unwrap_or(Value::Null);
    if object.get("jsonrpc") != Some(&Value::String("2.0".into())) {
        return invalid(echo, "jsonrpc must be \"2.0\"");
    }
    let method = match object.remove("method") {
        Some(Value::String(method)) => method,
        Some(_) => return invalid(echo, "method must be a string"),
        None if id.is_some() && (object.contains_key("result") || object.contains_key("error")) => {
            return Incoming::Response {
                id: echo,
                result: object.remove("result"),
            };
        }
        None => return invalid(echo, "method is missing"),
    };
    let params = match object.remove("params") {
        None => Map::new(),
        Some(Value::Object(params)) => params,
        Some(_) => return invalid(echo, "params must be an object"),
    };
    match id {
        Some(id) => Incoming::Request { id, method, params },
        None => Incoming::Notification { method, params },
    }
}

/// A success response.
pub fn result(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// An error response.
pub fn error(id: &Value, code: i64, message: &str, data: Option<Value>) -> Value {
    let mut error = json!({"code": code, "message": message});
    if let Some(data) = data {
        error["data"] = data;
    }
    json!({"jsonrpc": "2.0", "id": id, "error": error})
}

/// The response to a line over the size limit.
///
/// Seed 001 fixes the payload; JSON-RPC needs an envelope around it, and the
/// id is unknowable because the line was never parsed.
pub fn payload_too_large(bytes: u64, limit: usize) -> Value {
    error(
        &Value::Null,
        INVALID_REQUEST,
        "payload_too_large",
        Some(json!({
            "ok": false,
            "reason": "validation_failed",
            "errors": [{"path": "", "msg": "payload_too_large"}],
            "bytes": bytes,
            "limit_bytes": limit,
        })),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code_of(line: &str) -> Option<(Value, i64)> {
        match classify(line.as_bytes()) {
            Incoming::Invalid { id, code, .. } => Some((id, code)),
            _ => None,
        }
    }

    #[test]
    fn classifies_the_usual_suspects() {
        assert_eq!(code_of("{"), Some((Value::Null, PARSE_ERROR)));
        assert_eq!(code_of("\u{fffd}"), Some((Value::Null, PARSE_ERROR)));
        assert_eq!(code_of("[]"), Some((Value::Null, INVALID_REQUEST)));
        assert_eq!(
            code_of(r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#),
            Some((Value::Null, INVALID_REQUEST))
        );
        assert_eq!(code_of("42"), Some((Value::Null, INVALID_REQUEST)));
        assert_eq!(
            code_of(r#"{"jsonrpc":"1.0","id":7,"method":"ping"}"#),
            Some((json!(7), INVALID_REQUEST))
        );
        assert_eq!(
            code_of(r#"{"jsonrpc":"2.0","id":"a","method":3}"#),
            Some((json!("a"), INVALID_REQUEST))
        );
        assert_eq!(
            code_of(r#"{"jsonrpc":"2.0","id":{},"method":"ping"}"#),
            Some((Value::Null, INVALID_REQUEST))
        );
        assert_eq!(
            code_of(r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#),
            Some((Value::Null, INVALID_REQUEST))
        );
        assert_eq!(
            code_of(r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":[1]}"#),
            Some((json!(1), INVALID_REQUEST))
        );
        assert!(matches!(
            classify(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#),
            Incoming::Notification { .. }
        ));
        assert_eq!(
            classify(br#"{"jsonrpc":"2.0","id":3,"result":{}}"#),
            Incoming::Response {
                id: json!(3),
                result: Some(json!({}))
            }
        );
    }

    #[test]
    fn ids_are_echoed_unchanged() {
        for id in [
            json!(1),
            json!(-0.5),
            json!("x"),
            json!(18446744073709551615u64),
        ] {
            let line = json!({"jsonrpc": "2.0", "id": id, "method": "m"}).to_string();
            match classify(line.as_bytes()) {
                Incoming::Request { id: got, .. } => assert_eq!(got, id),
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn invalid_utf8_is_a_parse_error() {
        let line = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xff\"}";
        assert!(matches!(
            classify(line),
            Incoming::Invalid {
                code: PARSE_ERROR,
                ..
            }
        ));
    }
}
