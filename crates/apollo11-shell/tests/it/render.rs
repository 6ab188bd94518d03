//! Templates in a step's texts: only the template roots are templates; the shell's own
//! `${VAR}` stays as written.

use apollo11_author::{Mode, Scope};
use apollo11_shell::shell::{render, shell_text, source_offset};
use serde_json::json;

#[test]
fn shell_variables_pass_through_and_templates_render_quoted() {
    let scope = Scope {
        arguments: [("date".to_owned(), json!("2026-12-05; rm -rf /"))].into(),
        item: Some(json!({"name": "db1"})),
        run_id: "r1".into(),
        ..Scope::default()
    };
    let command = "echo ${HOME} ${X:-d} $${params.date} ${params.date} ${item.name} ${run.id}";
    assert_eq!(
        render(command, &scope, Mode::Shell).unwrap(),
        "echo ${HOME} ${X:-d} ${params.date} '2026-12-05; rm -rf /' 'db1' 'r1'"
    );
    assert_eq!(render("${item.name}", &scope, Mode::Plain).unwrap(), "db1");
}

#[test]
fn offsets_map_back_to_the_written_text() {
    let text = "a ${HOME} ${params.nope}";
    assert_eq!(shell_text(text), "a $${HOME} ${params.nope}");
    let escaped_at = shell_text(text).find("${params").unwrap();
    assert_eq!(
        source_offset(text, escaped_at),
        text.find("${params").unwrap()
    );
    let error = render(text, &Scope::default(), Mode::Shell).unwrap_err();
    assert_eq!(source_offset(text, error.at), 10);
}
