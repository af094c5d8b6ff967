pub const PLACEHOLDER: () = ();
