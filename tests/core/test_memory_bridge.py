"""The names a memory search's second hop follows (core/memory_bridge.py)."""

from __future__ import annotations

from contextd.core.memory_bridge import (
    bridge_names,
    hop_question,
    names_in,
    question_names,
    rank_named,
    without_names,
)


def test_names_in_latin_text() -> None:
    assert names_in("My sister is called Emily.") == ["Emily"]
    assert names_in("On 3 May 2025 I went hiking with Oscar.") == ["Oscar"]
    assert names_in("I live in New York, near Anna's flat.") == ["New York", "Anna"]
    assert names_in("I am vegetarian. My job is dull.") == []


def test_names_in_quotes_and_chinese() -> None:
    assert names_in("Oscar has a golden retriever called “Maple”.") == ["Maple", "Oscar"]
    assert names_in("我的猫叫「小白」") == ["小白"]
    assert names_in("用户的姐姐叫王芳") == ["王芳"]
    assert names_in("用户最好的朋友是林峰，住在大连") == ["林峰"]
    # A name inside a clause is not marked in Chinese: not taken.
    assert names_in("2025年3月5日用户和王芳一起爬山") == []


def test_bridge_names_leave_out_what_the_question_says() -> None:
    texts = ["My sister is called Emily and lives with Tom.", "Oscar is a pilot."]
    assert bridge_names("What does my sister do?", texts) == [("Emily", 0), ("Tom", 0)]
    # The question names Emily and Tom: the text naming them holds no one else, and
    # Oscar's text, which does not name them, leads nowhere.
    assert bridge_names("Does EMILY live with Tom?", texts) == []
    assert bridge_names("Is Emily older?", texts) == [("Tom", 0)]
    assert bridge_names("我姐姐是做什么的", ["用户的姐姐叫王芳"]) == [("王芳", 0)]


def test_a_question_naming_someone_follows_only_memories_that_name_them() -> None:
    sister = ["Caroline's younger sister is called Nora."]
    assert bridge_names("What does Caroline's sister do?", sister) == [("Nora", 0)]
    camping = ["On 28 September 2026 I went camping with Priya."]
    assert bridge_names("When did I go camping with Jonah?", camping) == []


def test_rank_named_keeps_memories_about_the_name_by_cosine() -> None:
    mentions = [
        (1, "Emily works as a dentist.", 10.0),
        (2, "On 3 May I went hiking with Emily.", 20.0),
        (3, "emily has a cat.", 30.0),
        (4, "Emily plays chess.", 40.0),
        (5, "Emily sings.", 50.0),  # no vector: left out
    ]
    cosines = {1: 0.4, 2: 0.9, 3: 0.1, 4: 0.1}
    # The hike is not about Emily; ties go to the newer memory.
    assert rank_named("Emily", mentions, cosines) == [1, 4, 3]


def test_the_second_hop_asks_the_question_of_the_person() -> None:
    """The relation's words (which every memory of the person lacks) and first-person
    words give way to the name."""
    assert hop_question("What does my sister do?", "My sister is called Emily.", "Emily") == (
        "Emily What does do ?"
    )
    assert hop_question("我姐姐是做什么的", "用户的姐姐叫王芳", "王芳") == "王芳是做什么"
    assert hop_question("我最好的朋友在哪个城市", "用户最好的朋友是林峰", "林峰") == (
        "林峰在哪个城市"
    )


def test_the_names_a_question_holds() -> None:
    assert question_names("Would Melanie enjoy a chamber music concert?") == ["Melanie"]
    assert question_names("Which pastime do Jon and Gina have in common?") == ["Jon", "Gina"]
    assert question_names("When was Nate's trip to New Orleans?") == ["Nate", "New Orleans"]
    assert question_names("What does my sister do?") == []
    assert question_names("我姐姐是做什么的") == []
    assert without_names("When was Nate’s trip to New Orleans?", ["Nate", "New Orleans"]) == (
        "When was trip to ?"
    )
