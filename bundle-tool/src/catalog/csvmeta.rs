//! `olm.csv.metadata` as opm builds it (`property.MustBuildCSVMetadata`): the CSV decoded
//! into operator-framework/api's typed `ClusterServiceVersion` (unknown fields dropped,
//! keys matched case-insensitively like encoding/json), then these fields written in
//! their Go struct order with their `omitempty` rules.

use serde_json::{Map, Value};

use super::goenc::Node;

#[derive(Debug, Clone, Copy)]
enum Ty {
    Str,
    Bool,
    Int,
    StrMap,
    /// json.RawMessage: copied as the CSV's own JSON.
    Raw,
    List(&'static Ty),
    Struct(&'static [Field]),
}

#[derive(Debug, Clone, Copy)]
struct Field {
    json: &'static str,
    ty: Ty,
    omitempty: bool,
}

const fn f(json: &'static str, ty: Ty, omitempty: bool) -> Field {
    Field { json, ty, omitempty }
}

const DESCRIPTOR: &[Field] = &[
    f("path", Ty::Str, false),
    f("displayName", Ty::Str, true),
    f("description", Ty::Str, true),
    f("x-descriptors", Ty::List(&Ty::Str), true),
    f("value", Ty::Raw, true),
];
const RESOURCE: &[Field] = &[f("name", Ty::Str, false), f("kind", Ty::Str, false), f("version", Ty::Str, false)];
const CRD_DESCRIPTION: &[Field] = &[
    f("name", Ty::Str, false),
    f("version", Ty::Str, false),
    f("kind", Ty::Str, false),
    f("displayName", Ty::Str, true),
    f("description", Ty::Str, true),
    f("resources", Ty::List(&Ty::Struct(RESOURCE)), true),
    f("statusDescriptors", Ty::List(&Ty::Struct(DESCRIPTOR)), true),
    f("specDescriptors", Ty::List(&Ty::Struct(DESCRIPTOR)), true),
    f("actionDescriptors", Ty::List(&Ty::Struct(DESCRIPTOR)), true),
];
const API_SERVICE_DESCRIPTION: &[Field] = &[
    f("name", Ty::Str, false),
    f("group", Ty::Str, false),
    f("version", Ty::Str, false),
    f("kind", Ty::Str, false),
    f("deploymentName", Ty::Str, true),
    f("containerPort", Ty::Int, true),
    f("displayName", Ty::Str, true),
    f("description", Ty::Str, true),
    f("resources", Ty::List(&Ty::Struct(RESOURCE)), true),
    f("statusDescriptors", Ty::List(&Ty::Struct(DESCRIPTOR)), true),
    f("specDescriptors", Ty::List(&Ty::Struct(DESCRIPTOR)), true),
    f("actionDescriptors", Ty::List(&Ty::Struct(DESCRIPTOR)), true),
];
const CRDS: &[Field] = &[
    f("owned", Ty::List(&Ty::Struct(CRD_DESCRIPTION)), true),
    f("required", Ty::List(&Ty::Struct(CRD_DESCRIPTION)), true),
];
const API_SERVICES: &[Field] = &[
    f("owned", Ty::List(&Ty::Struct(API_SERVICE_DESCRIPTION)), true),
    f("required", Ty::List(&Ty::Struct(API_SERVICE_DESCRIPTION)), true),
];
const INSTALL_MODE: &[Field] = &[f("type", Ty::Str, false), f("supported", Ty::Bool, false)];
const APP_LINK: &[Field] = &[f("name", Ty::Str, true), f("url", Ty::Str, true)];
const MAINTAINER: &[Field] = &[f("name", Ty::Str, true), f("email", Ty::Str, true)];
const GVK: &[Field] = &[f("group", Ty::Str, false), f("version", Ty::Str, false), f("kind", Ty::Str, false)];

/// CSVMetadata's fields, in order, and where each comes from in the CSV.
const METADATA: &[(Field, &[&str])] = &[
    (f("annotations", Ty::StrMap, true), &["metadata", "annotations"]),
    (f("apiServiceDefinitions", Ty::Struct(API_SERVICES), true), &["spec", "apiservicedefinitions"]),
    (f("crdDescriptions", Ty::Struct(CRDS), true), &["spec", "customresourcedefinitions"]),
    (f("description", Ty::Str, true), &["spec", "description"]),
    (f("displayName", Ty::Str, true), &["spec", "displayName"]),
    (f("installModes", Ty::List(&Ty::Struct(INSTALL_MODE)), true), &["spec", "installModes"]),
    (f("keywords", Ty::List(&Ty::Str), true), &["spec", "keywords"]),
    (f("labels", Ty::StrMap, true), &["metadata", "labels"]),
    (f("links", Ty::List(&Ty::Struct(APP_LINK)), true), &["spec", "links"]),
    (f("maintainers", Ty::List(&Ty::Struct(MAINTAINER)), true), &["spec", "maintainers"]),
    (f("maturity", Ty::Str, true), &["spec", "maturity"]),
    (f("minKubeVersion", Ty::Str, true), &["spec", "minKubeVersion"]),
    (f("nativeAPIs", Ty::List(&Ty::Struct(GVK)), true), &["spec", "nativeAPIs"]),
    (f("provider", Ty::Struct(APP_LINK), true), &["spec", "provider"]),
];

/// A field of a JSON object as encoding/json finds it: the exact key, else the first
/// key equal under case folding.
fn lookup<'a>(object: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    object.get(key).or_else(|| object.iter().find(|(k, _)| k.eq_ignore_ascii_case(key)).map(|(_, v)| v))
}

/// The Go value decoded from `value` (None: absent), as (node, is it empty for omitempty).
fn decode(ty: Ty, value: Option<&Value>, at: &str) -> Result<(Node, bool), String> {
    let wrong =
        |want: &str| Err(format!("{at}: cannot unmarshal {} into a Go {want}", value.map(kind).unwrap_or("nothing")));
    let null = matches!(value, None | Some(Value::Null));
    match ty {
        Ty::Str => match value {
            Some(Value::String(s)) => Ok((Node::String(s.clone()), s.is_empty())),
            _ if null => Ok((Node::String(String::new()), true)),
            _ => wrong("string"),
        },
        Ty::Bool => match value {
            Some(Value::Bool(b)) => Ok((Node::Bool(*b), !*b)),
            _ if null => Ok((Node::Bool(false), true)),
            _ => wrong("bool"),
        },
        Ty::Int => match value {
            Some(Value::Number(n)) if n.as_i64().is_some_and(|i| i32::try_from(i).is_ok()) => {
                let i = n.as_i64().unwrap_or(0);
                Ok((Node::Number(i.to_string()), i == 0))
            }
            _ if null => Ok((Node::Number("0".into()), true)),
            _ => wrong("int32"),
        },
        Ty::Raw => match value {
            None => Ok((Node::Raw(Box::new(Node::Null)), true)),
            Some(v) => Ok((Node::Raw(Box::new(Node::from_value(v))), false)),
        },
        Ty::StrMap => match value {
            Some(Value::Object(m)) => {
                let mut fields = Vec::new();
                for (k, v) in m {
                    match v {
                        Value::String(s) => fields.push((k.clone(), Node::String(s.clone()))),
                        Value::Null => fields.push((k.clone(), Node::String(String::new()))),
                        _ => return Err(format!("{at}.{k}: cannot unmarshal {} into a Go string", kind(v))),
                    }
                }
                let empty = fields.is_empty();
                Ok((Node::Object(fields), empty))
            }
            _ if null => Ok((Node::Null, true)),
            _ => wrong("map[string]string"),
        },
        Ty::List(item) => match value {
            Some(Value::Array(a)) => {
                let items = a
                    .iter()
                    .enumerate()
                    .map(|(i, v)| decode(*item, Some(v), &format!("{at}[{i}]")).map(|(n, _)| n))
                    .collect::<Result<Vec<_>, _>>()?;
                let empty = items.is_empty();
                Ok((Node::Array(items), empty))
            }
            _ if null => Ok((Node::Null, true)),
            _ => wrong("slice"),
        },
        Ty::Struct(fields) => {
            let empty_object = Map::new();
            let object = match value {
                Some(Value::Object(m)) => m,
                _ if null => &empty_object,
                _ => return wrong("struct"),
            };
            let mut out = Vec::new();
            for field in fields {
                let (node, empty) = decode(field.ty, lookup(object, field.json), &format!("{at}.{}", field.json))?;
                if !(field.omitempty && empty) {
                    out.push((field.json.to_string(), node));
                }
            }
            // A struct is never empty for omitempty.
            Ok((Node::Object(out), false))
        }
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// The `olm.csv.metadata` value of `csv` (the manifest as decoded JSON), in Go's order.
pub fn from_csv(csv: &Value) -> Result<Node, String> {
    let mut out = Vec::new();
    for (field, path) in METADATA {
        let mut v = Some(csv);
        for step in *path {
            v = v.and_then(Value::as_object).and_then(|o| lookup(o, step));
        }
        let (node, empty) = decode(field.ty, v, &path.join("."))?;
        if !(field.omitempty && empty) {
            out.push((field.json.to_string(), node));
        }
    }
    Ok(Node::Object(out))
}

/// A stored `olm.csv.metadata` value (already in opm's shape) in Go's field order.
pub fn node(value: &Value) -> Result<Node, String> {
    let Some(object) = value.as_object() else { return Err("olm.csv.metadata is not an object".into()) };
    let mut out = Vec::new();
    for (field, _) in METADATA {
        let (node, empty) = decode(field.ty, object.get(field.json), field.json)?;
        if !(field.omitempty && empty) {
            out.push((field.json.to_string(), node));
        }
    }
    Ok(Node::Object(out))
}

/// A node back to a serde value (key order is lost; strings and numbers are kept).
pub fn to_value(node: &Node) -> Value {
    match node {
        Node::Null => Value::Null,
        Node::Bool(b) => Value::Bool(*b),
        Node::Number(n) => serde_json::from_str(n).unwrap_or(Value::Null),
        Node::String(s) => Value::String(s.clone()),
        Node::Array(a) => Value::Array(a.iter().map(to_value).collect()),
        Node::Object(fields) => Value::Object(fields.iter().map(|(k, v)| (k.clone(), to_value(v))).collect()),
        Node::Raw(inner) => to_value(inner),
    }
}
