//! Which preview comments to edit, post and delete for a report's parts, pure: one comment per
//! part, the oldest of gitward's own preview comments holding part 1, and never a second
//! comment for a part one already holds.

use super::api::Comment;

/// One step of putting a report's parts on a pull request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step<'a> {
    /// Comment `id` holds its part already.
    Keep {
        /// The comment.
        id: u64,
    },
    /// Comment `id` gets `body`, its part's new text.
    Edit {
        /// The comment.
        id: u64,
        /// The part.
        body: &'a str,
    },
    /// A part no comment holds yet: posted.
    Create {
        /// The part.
        body: &'a str,
    },
    /// A comment of a part the report no longer has: deleted.
    Delete {
        /// The comment.
        id: u64,
    },
}

/// The steps that put `bodies` (the parts, in order) into `ours` (gitward's own preview
/// comments on the pull request, in any order): the comments by id (the order they were posted
/// in) take the parts in order, in place; parts beyond them are posted, comments beyond them
/// deleted. Steps in part order, deletions last.
pub fn plan<'a>(ours: &[&Comment], bodies: &'a [String]) -> Vec<Step<'a>> {
    let mut ours: Vec<&Comment> = ours.to_vec();
    ours.sort_by_key(|c| c.id);
    let mut steps: Vec<Step<'a>> = bodies
        .iter()
        .enumerate()
        .map(|(i, body)| match ours.get(i) {
            Some(c) if c.body == *body => Step::Keep { id: c.id },
            Some(c) => Step::Edit { id: c.id, body },
            None => Step::Create { body },
        })
        .collect();
    steps.extend(ours.iter().skip(bodies.len()).map(|c| Step::Delete { id: c.id }));
    steps
}

#[cfg(test)]
mod tests {
    use super::*;

    fn comment(id: u64, body: &str) -> Comment {
        Comment { id, author: "gitward".into(), body: body.into() }
    }

    #[test]
    fn parts_go_into_the_comments_in_the_order_they_were_posted() {
        let (a, b) = (comment(9, "old 2"), comment(4, "old 1"));
        let bodies = ["old 1".to_owned(), "new 2".to_owned(), "new 3".to_owned()];
        let steps = plan(&[&a, &b], &bodies);
        assert_eq!(steps, [Step::Keep { id: 4 }, Step::Edit { id: 9, body: "new 2" }, Step::Create { body: "new 3" }]);
    }

    #[test]
    fn a_shorter_report_deletes_the_comments_of_the_parts_it_lost() {
        let (a, b, c) = (comment(1, "x"), comment(2, "y"), comment(3, "z"));
        let bodies = ["one".to_owned()];
        let steps = plan(&[&a, &b, &c], &bodies);
        assert_eq!(steps, [Step::Edit { id: 1, body: "one" }, Step::Delete { id: 2 }, Step::Delete { id: 3 }]);
        assert_eq!(plan(&[], &bodies), [Step::Create { body: "one" }]);
    }
}
